"""The warehouse on disk: append-only Parquet files written atomically, DuckDB views over them."""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.errors import WarehouseError
from needlescope.warehouse.compaction import (
    EMPTY_FILE,
    Snapshot,
    mark_views_snapshot,
    partial_of,
    snapshot,
    table_sql,
    use_snapshot,
)
from needlescope.warehouse.schema import SCHEMA_VERSION, TABLES

DEFAULT_ROOT = Path("warehouse/data")
DB_NAME = "needlescope.duckdb"
IDENTITY_FILE = "warehouse.json"


def default_root() -> Path:
    return Path(os.environ.get("NEEDLESCOPE_WAREHOUSE", DEFAULT_ROOT))


def slug(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value)[:80] or "_"


def views_sql(live_from: tuple[Path, Snapshot] | None = None) -> str:
    """views.sql, then each probe's views_<probe>.sql (they build on the shared views). The
    tables are read from the connection's snapshot variables, or with ``live_from`` (the
    parquet folder and a snapshot) from globs that see later appends (compaction.table_sql)."""
    folder = resources.files("needlescope.warehouse")
    names = [
        "views.sql",
        *sorted(
            f.name
            for f in folder.iterdir()
            if f.name.startswith("views_") and f.name.endswith(".sql")
        ),
    ]
    text = "\n".join(folder.joinpath(name).read_text() for name in names)
    # These views are generated from the one definition of their figures (stats.py).
    from needlescope.warehouse.stats import POSITION_ACCURACY_VIEW, RECALL_STATS_VIEW

    text += POSITION_ACCURACY_VIEW + RECALL_STATS_VIEW
    for table in TABLES:
        text = text.replace(f"{{table:{table}}}", table_sql(table, live_from=live_from))
    return text


def _schema_of(path: Path) -> pa.Schema | None:
    """The schema of a Parquet file, or None if it is not one (say, cut short by a crash)."""
    try:
        return pq.read_schema(path).remove_metadata()
    except (OSError, pa.ArrowException):
        return None


def _writer_pid(name: str) -> int | None:
    match = re.match(r"^\.\d{8}T\d+-(\d+)-", name)
    return int(match.group(1)) if match else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Warehouse:
    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.parquet = self.root / "parquet"
        self.db_path = self.root / DB_NAME
        self._seq = 0

    # -- setup -----------------------------------------------------------------------------

    def ensure(self) -> Warehouse:
        """Create the folders, the empty per-table files and the identity file if missing."""
        try:
            for table, schema in TABLES.items():
                folder = self.parquet / table
                folder.mkdir(parents=True, exist_ok=True)
                self._write_empty_file(folder, schema)
            self._identity()
            self._remove_orphaned_partials()
        except OSError as exc:
            raise WarehouseError(f"cannot write warehouse at {self.root}: {exc.strerror}") from None
        return self

    def _write_empty_file(self, folder: Path, schema: pa.Schema) -> None:
        """An empty file of the current schema in every table folder.

        Every glob then matches at least one file (views work on an empty warehouse), and
        because views read with union_by_name, a column added by a newer schema version
        reads as NULL in older files: adding columns is the only schema change we make.
        """
        empty = folder / EMPTY_FILE
        found = _schema_of(empty) if empty.exists() else None
        if found is not None and found.equals(schema, check_metadata=False):
            return
        # Several processes may create one warehouse at once: each writes its own temp file
        # (the same content), and the renames replace each other atomically.
        self._atomic_write(schema.empty_table(), empty, unique=True)

    def upgrade(self) -> None:
        """Bring an existing warehouse's empty schema files up to this version (idempotent)."""
        try:
            for table, schema in TABLES.items():
                folder = self.parquet / table
                folder.mkdir(parents=True, exist_ok=True)
                self._write_empty_file(folder, schema)
        except OSError:
            pass  # a read-only warehouse: queries on it may miss new columns, nothing else

    def _remove_orphaned_partials(self) -> None:
        """Temp files left by a killed writer (its pid is in the name): never read, safe to drop."""
        for partial in self.parquet.rglob(".*.parquet.partial"):  # compaction cleans its own
            pid = _writer_pid(partial.name)
            if pid is not None and not _alive(pid):
                partial.unlink(missing_ok=True)

    def _identity(self) -> dict[str, Any]:
        path = self.root / IDENTITY_FILE
        if not path.exists():
            meta = {
                "id": uuid.uuid4().hex,
                "schema_version": SCHEMA_VERSION,
                "created_at": datetime.now(UTC).isoformat(),
            }
            # Written whole under a name of its own, then linked into place: a process that
            # creates the same warehouse at the same moment never reads a half-written file,
            # and the first link wins (link, unlike rename, never replaces).
            draft = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
            draft.write_text(json.dumps(meta), encoding="utf-8")
            try:
                os.link(draft, path)
            except FileExistsError:
                pass
            finally:
                draft.unlink(missing_ok=True)
        return dict(json.loads(path.read_text(encoding="utf-8")))

    @property
    def id(self) -> str:
        return str(self._identity()["id"])

    def exists(self) -> bool:
        return (self.root / IDENTITY_FILE).is_file()

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, table: str, rows: Iterable[Mapping[str, Any]], *, parts: Iterable[str] = ()
    ) -> Path | None:
        """Write rows as one new Parquet file; readers never see a partial file."""
        schema = TABLES[table]
        records = [{"schema_version": SCHEMA_VERSION, **row} for row in rows]
        if not records:
            return None
        data = pa.Table.from_pylist(records, schema=schema)
        folder = self.parquet.joinpath(table, *(slug(p) for p in parts))
        self._seq += 1
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
        name = f"{stamp}-{os.getpid()}-{self._seq:05d}-{uuid.uuid4().hex[:8]}"
        target = folder / f"{name}.parquet"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._atomic_write(data, target)
        except OSError as exc:
            raise WarehouseError(f"cannot write {target}: {exc.strerror}") from None
        return target

    @staticmethod
    def _atomic_write(data: pa.Table, target: Path, unique: bool = False) -> None:
        """``unique``: a temp name of this writer's own, for a target others may write too (a
        data file's name is unique already). The name starts with a stamp and the pid, as the
        orphaned-partial sweep expects."""
        partial = partial_of(target)
        if unique:
            stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            partial = target.with_name(f".{stamp}-{target.name}.partial")
        pq.write_table(data, partial, compression="zstd")
        with partial.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, target)

    # -- reading ---------------------------------------------------------------------------

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with the views: no lock on the .duckdb file."""
        if not self.exists():
            raise WarehouseError(f"no warehouse at {self.root} (run a sweep or import first)")
        self.upgrade()
        con = duckdb.connect()
        use_snapshot(con, snapshot(self.root))
        con.execute(views_sql())
        return con

    def refresh_views_file(self) -> bool:
        """(Re)create the views in the .duckdb file for the duckdb CLI; False if it is locked."""
        try:
            con = duckdb.connect(str(self.db_path))
        except duckdb.IOException:
            return False
        taken_at = time.time()
        try:
            con.execute(views_sql(live_from=(self.parquet.resolve(), snapshot(self.root))))
        finally:
            con.close()
        # Compaction deletes merged files' sources only once this file's views stopped reading them.
        mark_views_snapshot(self.root, taken_at)
        return True

    def query_table(self, table: str, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """``sql`` over one table's files, named ``t``; no views, no lock on the .duckdb file."""
        con = duckdb.connect()
        try:
            use_snapshot(con, snapshot(self.root, (table,)), tables=(table,))
            return con.execute(f"WITH t AS {table_sql(table)} {sql}", params).fetchall()
        finally:
            con.close()

    def graded_cell_ids(self, epoch: str) -> set[str]:
        """Cells of an epoch that already have a graded answer: never queried again."""
        rows = self.query_table(
            "answers",
            "SELECT DISTINCT cell_id FROM t WHERE epoch = ? AND error_kind IS NULL",
            [epoch],
        )
        return {row[0] for row in rows}

    def latest_errors(self, epoch: str) -> dict[str, str]:
        """Cells of an epoch with no graded answer whose latest attempt failed: their error kind."""
        rows = self.query_table(
            "answers",
            "SELECT cell_id, arg_max(error_kind, answered_at) FROM t WHERE epoch = ? "
            "GROUP BY cell_id HAVING count(*) FILTER (WHERE error_kind IS NULL) = 0",
            [epoch],
        )
        return {cell: kind for cell, kind in rows}

    def run_start(self, run_id: str) -> dict[str, Any] | None:
        """The `start` row of a run (its epoch, config and flow run), or None if unknown."""
        rows = self.query_table(
            "runs",
            "SELECT epoch, config_json, flow_run_id FROM t WHERE run_id = ? AND event = 'start'",
            [run_id],
        )
        if not rows:
            return None
        epoch, config_json, flow_run_id = rows[0]
        return {"epoch": epoch, "config_json": config_json, "flow_run_id": flow_run_id}

    def epoch_of_flow_run(self, flow_run_id: str) -> str | None:
        """The epoch an earlier attempt of this Prefect flow run swept: its retry keeps it."""
        rows = self.query_table(
            "runs",
            "SELECT epoch FROM t WHERE flow_run_id = ? AND event = 'start' ORDER BY \"at\" LIMIT 1",
            [flow_run_id],
        )
        return str(rows[0][0]) if rows else None

    def known_cell_ids(self) -> set[str]:
        rows = self.query_table(
            "cells", "SELECT DISTINCT cell_id FROM t WHERE prompt_sha256 IS NOT NULL", []
        )
        return {row[0] for row in rows}
