"""Import of the recall seed's SQLite result databases into the warehouse's own tables.

Every database of one model goes to the epoch ``legacy-<model>``. A cell id hashes the
model, the seed's table name, the row id and the expected needles; a parse failure, whose
reply the seed did not keep, hashes its 1-based index within its length instead. So a
second import of the same database finds every cell already answered and writes nothing.
A stored reply passed the seed's extraction already: it is graded by ``grade_stored``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from needlescope.errors import WarehouseError
from needlescope.grading import UNKNOWN
from needlescope.grading.recall import grade_stored
from needlescope.provenance import canonical_json, short_hash
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import analysis_rows

RAW_TABLE = re.compile(r"(bytes|tokens)_([0-9]+)")
STATS_TABLE = re.compile(r"(bytes|tokens)_stats")
COLUMN_PREFIX = re.compile(r"^(?:bytes|tokens)_")
NOT_KEPT = "reply not kept by the seed (counted as a parse failure)"
# The seed stored no finish reason: its answers' validity is unknown, and they count as valid.
FAILED = {
    "response": None,
    "response_kept": False,
    "parse_ok": False,
    "parse_error": NOT_KEPT,
    "validity": UNKNOWN,
}
PROBE = "recall"
# Bump when the meaning of a legacy cell changes, so old and new ones never share an id.
ID_VERSION = 1
# Answers last: an answer is what marks a cell done, so a crash mid-length imports it again.
WRITE_ORDER = ("cells", "needle_outcomes", "hallucinations", "duplicates", "answers")

Rows = dict[str, list[dict[str, Any]]]


def legacy_epoch(model: str) -> str:
    return f"legacy-{model}"


@dataclass
class LengthPlan:
    """One length of the database, with the cells the warehouse does not hold yet."""

    unit: str
    length: int
    has_raw: bool
    parse_failures: int  # the stats table's count; their replies are gone
    total: int = 0
    needle_counts: set[int] = field(default_factory=set)
    rows: dict[int, tuple[str, list[Any]]] = field(default_factory=dict)  # id: cell, expected
    failures: list[tuple[int, str]] = field(default_factory=list)  # (index, cell)

    @property
    def table(self) -> str:
        return f"{self.unit}_{self.length}"

    @property
    def todo(self) -> int:
        return len(self.rows) + len(self.failures)

    def summary(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "answers": len(self.rows),
            "parse_failures": len(self.failures),
            "skipped": self.total - self.todo,
        }


def import_legacy_db(db_path: Path, model: str, warehouse: Warehouse) -> dict[str, Any]:
    """Import one seed results database, opened read-only, into epoch ``legacy-<model>``.

    Returns the source file name, model, epoch, run id (None when nothing was new), rows
    written per table, per-length counts, and the answers, parse failures and skipped cells.
    """
    db_path = Path(db_path)
    if not model.strip():
        raise WarehouseError("the model name must not be empty")
    conn = _open(db_path)
    try:
        return _Importer(conn, db_path.name, model, warehouse).run()
    except sqlite3.Error as exc:
        raise WarehouseError(f"cannot read {db_path}: {exc}") from None
    finally:
        conn.close()


def _open(db_path: Path) -> sqlite3.Connection:
    if not db_path.is_file():
        raise WarehouseError(f"no such database file: {db_path}")
    conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise WarehouseError(f"not a SQLite database: {db_path} ({exc})") from None
    return conn


class _Importer:
    """Plans every length first (which cells are new), then grades and writes length by length."""

    def __init__(self, conn: sqlite3.Connection, source: str, model: str, store: Warehouse) -> None:
        self.conn, self.source, self.model, self.store = conn, source, model, store
        self.epoch = legacy_epoch(model)
        self.run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
        self.done: set[str] = set()  # cells answered in the epoch already
        self.known: set[str] = set()  # cells in the warehouse already, in any epoch
        self.key = {"run_id": self.run_id, "epoch": self.epoch, "model": model, "probe": PROBE}

    def run(self) -> dict[str, Any]:
        lengths = self._discover()  # before touching the warehouse: a bad file creates none
        self.store.ensure()
        self.done = self.store.graded_cell_ids(self.epoch)
        self.known = self.store.known_cell_ids()
        plans = [self._plan(p) for p in lengths]
        total = sum(p.total for p in plans)
        todo = sum(p.todo for p in plans)
        written = dict.fromkeys(("runs", *WRITE_ORDER), 0)
        parsed = 0
        if todo:
            counts = {"cells_total": total, "cells_skipped": total - todo}
            self._run_row("start", plans, counts)
            try:
                for plan in plans:
                    parsed += self._write(plan, written)
            except Exception as exc:
                self._run_row("end", plans, {**counts, "note": f"aborted: {exc}"[:500]})
                raise
            self._run_row("end", plans, {**counts, "cells_graded": todo, "cells_failed": 0})
            written["runs"] = 2
        return {
            "source": self.source,
            "model": self.model,
            "epoch": self.epoch,
            "run_id": self.run_id if todo else None,
            "rows": written,
            "lengths": [p.summary() for p in plans],
            "answers_imported": parsed,
            "parse_failures_imported": written["answers"] - parsed,
            "skipped": total - todo,
        }

    # -- reading ---------------------------------------------------------------------------

    def _discover(self) -> list[LengthPlan]:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
        names = [r[0] for r in self.conn.execute(sql)]
        raw = {(m[1], int(m[2])) for n in names if (m := RAW_TABLE.fullmatch(n))}
        if not raw:
            raise WarehouseError(f"no bytes_<N> or tokens_<N> tables in {self.source}")
        failures: dict[tuple[str, int], int] = {}
        for name in names:
            if m := STATS_TABLE.fullmatch(name):
                failures.update(((m[1], n), f) for n, f in self._stats(name).items())
        keys = sorted(raw | {k for k, f in failures.items() if f > 0})
        return [LengthPlan(u, n, (u, n) in raw, failures.get((u, n), 0)) for u, n in keys]

    def _stats(self, table: str) -> dict[int, int]:
        """Parse failures per length; the key column is byte_count, or file_name for tokens."""
        info = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        columns = [COLUMN_PREFIX.sub("", c[1]) for c in info]
        if "parse_fail_count" not in columns:
            raise WarehouseError(f"{self.source}: {table} has no parse_fail_count column")
        key = next((c for c, col in zip(columns, info, strict=True) if col[5] == 1), columns[0])
        failures: dict[int, int] = {}
        for values in self.conn.execute(f'SELECT * FROM "{table}"'):
            row = dict(zip(columns, values, strict=True))
            length = re.search(r"[0-9]+", str(row[key]))
            if length is None:
                raise WarehouseError(f"{self.source}: {table} has no length in {row[key]!r}")
            failures[int(length[0])] = int(row["parse_fail_count"] or 0)
        return failures

    def _plan(self, plan: LengthPlan) -> LengthPlan:
        if plan.has_raw:
            sql = f'SELECT id, standard_json FROM "{plan.table}" ORDER BY id'
            for row_id, standard in self.conn.execute(sql):
                expected = self._expected(plan.table, row_id, standard)
                plan.needle_counts.add(len(expected))
                plan.total += 1
                cell_id = self._cell_id(plan.table, row=row_id, expected=expected)
                if cell_id not in self.done:
                    plan.rows[row_id] = (cell_id, expected)
        for index in range(1, plan.parse_failures + 1):
            plan.total += 1
            cell_id = self._cell_id(plan.table, parse_failure=index)
            if cell_id not in self.done:
                plan.failures.append((index, cell_id))
        return plan

    def _expected(self, table: str, row_id: int, text: str) -> list[Any]:
        try:
            standard = json.loads(text)
            return [standard[k] for k in sorted(standard, key=int)]
        except (TypeError, ValueError, AttributeError):
            raise WarehouseError(
                f"{self.source}: {table} row {row_id}: standard_json is not a digit-keyed object"
            ) from None

    def _cell_id(self, table: str, **where: Any) -> str:
        return short_hash({"legacy": ID_VERSION, "model": self.model, "table": table, **where})

    # -- writing ---------------------------------------------------------------------------

    def _write(self, plan: LengthPlan, written: dict[str, int]) -> int:
        """Write one length's new cells, a file per table; returns how many replies parsed."""
        tables: Rows = {t: [] for t in WRITE_ORDER}
        parsed = 0
        sql = f'SELECT id, test_time, model_response_json, elapsed_time FROM "{plan.table}"'
        for row_id, test_time, response, elapsed in self.conn.execute(sql) if plan.rows else ():
            if (todo := plan.rows.get(row_id)) is None:
                continue
            cell_id, expected = todo
            grade = grade_stored(expected, response)  # extracted by the seed already
            parsed += bool(grade.parse_ok)
            self._add_cell(tables, plan, cell_id, len(expected), {"row": row_id}, expected)
            answered = None if grade.answered is None else json.dumps(grade.answered)
            tables["answers"].append(
                {
                    **self.key,
                    **asdict(grade),
                    "cell_id": cell_id,
                    "answered": answered,
                    "answered_at": _utc(test_time),
                    "response": response,
                    "response_kept": True,
                    "latency_s": None if elapsed is None else float(elapsed),
                    "validity": UNKNOWN,
                }
            )
            outcomes, invented, copies = analysis_rows(
                expected, grade, self.run_id, self.epoch, cell_id, self.model, PROBE
            )
            tables["needle_outcomes"] += outcomes
            tables["hallucinations"] += invented
            tables["duplicates"] += copies
        # Unknown needle counts stay NULL: a guess would split or merge accuracy_by_length groups.
        needles = next(iter(plan.needle_counts)) if len(plan.needle_counts) == 1 else None
        for index, cell_id in plan.failures:
            self._add_cell(tables, plan, cell_id, needles, {"parse_failure": index}, None)
            tables["answers"].append({**self.key, **FAILED, "cell_id": cell_id})
        for table in WRITE_ORDER:
            self.store.append(table, tables[table], parts=[PROBE, self.model])
            written[table] += len(tables[table])
        return parsed

    def _add_cell(
        self,
        tables: Rows,
        plan: LengthPlan,
        cell_id: str,
        needle_count: int | None,
        origin: dict[str, int],
        expected: list[Any] | None,
    ) -> None:
        if cell_id in self.known:
            return
        spec = {"kind": "legacy", "origin": "recall seed results", "file": self.source}
        identity = {"name": self.model, "provider": "legacy", "model": self.model}
        tables["cells"].append(
            {
                "cell_id": cell_id,
                "context_id": cell_id,
                "run_id": self.run_id,
                "created_at": datetime.now(UTC),
                "model": self.model,
                "model_identity": canonical_json(identity),
                "probe": PROBE,
                "filler": "legacy",
                "filler_spec": canonical_json({**spec, "table": plan.table, **origin}),
                "placement": "unknown",
                "region": "whole",
                "prompt_version": "legacy",
                "length": plan.length,
                "length_unit": plan.unit,
                "needle_count": needle_count,
                "expected": None if expected is None else json.dumps(expected),
            }
        )

    def _run_row(self, event: str, plans: list[LengthPlan], counts: dict[str, Any]) -> None:
        config = {"source": self.source, "model": self.model, "epoch": self.epoch}
        row = {
            "run_id": self.run_id,
            "epoch": self.epoch,
            "event": event,
            "at": datetime.now(UTC),
            "config_name": "import-legacy",
            "config_json": canonical_json({**config, "lengths": [p.summary() for p in plans]}),
            "needlescope_version": version("needlescope"),
            **counts,
        }
        self.store.append("runs", [row])


def _utc(value: object) -> datetime | None:
    """The seed's test_time: SQLite's CURRENT_TIMESTAMP, which is UTC without a zone."""
    try:
        moment = datetime.fromisoformat(str(value).strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
