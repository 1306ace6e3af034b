"""Rollups: per-needle and per-answer counts kept up to date, so position accuracy,
accuracy_by_length and recall_stats read thousands of rows, not hundreds of millions.

``needle_tallies``, ``answer_tallies`` and ``tally_epochs`` count what ``results`` picks, and
``attempts`` holds a narrow row per attempt. Derived data, never a second source of truth: a
*generation* (``rollups/gen-<id>.json``) covers some files of the raw tables; files appended
since are *fresh*, added at query time (``tallies.sql``); a generation that does not match the
reader's snapshot is not used. Compaction writes the generations, ``needlescope rollups
--rebuild`` derives one from the raw tables alone, and writers never touch them.

Design: docs/design/warehouse.md#rollups
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa

from needlescope.warehouse.store.compaction import (
    EMPTY_FILE,
    Manifest,
    Snapshot,
    manifests,
    sql_text,
    table_sql,
)
from needlescope.warehouse.store.schema import TABLES

ROLLUPS = "rollups"
# A generation of another format is ignored (and replaced by the next compaction). 2: the
# answer tallies and result epochs (accuracy_by_length, recall_stats) joined the needle tallies.
# 3: the hallucination tallies, and the failed requests' error kinds in the answer tallies.
FORMAT = 3
CURRENT = "current.json"
DATA = "data"
COVERED_TABLES = ("answers", "needle_outcomes", "hallucinations")
MAX_DELTAS = 8  # past this many attempt (or epoch) files a generation's are merged into one

ATTEMPTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("epoch", pa.string()),
        ("cell_id", pa.string()),
        ("probe", pa.string()),
        ("model", pa.string()),
        ("answered_at", pa.timestamp("us", tz="UTC")),
        ("graded", pa.bool_()),
        ("error_kind", pa.string()),
        ("validity", pa.string()),
        ("parse_ok", pa.bool_()),
        ("accuracy", pa.float64()),  # as `results` has it (tallies.sql: result_accuracy)
        ("latency_s", pa.float64()),
    ]
)
TALLIES = pa.schema(
    [
        ("cell_id", pa.string()),
        ("probe", pa.string()),
        ("model", pa.string()),
        ("needle_index", pa.int64()),
        ("validity", pa.string()),
        ("needles", pa.int64()),  # needle rows: parsed answers that expected this needle
        ("in_lcs", pa.int64()),
        ("correct", pa.int64()),
        ("missing", pa.int64()),
        ("misorder", pa.int64()),
    ]
)
MEASURES = ("needles", "in_lcs", "correct", "missing", "misorder")
ANSWER_TALLIES = pa.schema(
    [
        ("cell_id", pa.string()),
        ("probe", pa.string()),
        ("model", pa.string()),
        ("validity", pa.string()),
        ("graded", pa.bool_()),
        ("error_kind", pa.string()),
        ("parse_ok", pa.bool_()),
        ("accuracy", pa.float64()),
        ("answers", pa.int64()),
        ("latencies", pa.int64()),  # answers with a latency, and the sum of their latencies
        ("latency_sum", pa.float64()),
    ]
)
ANSWER_MEASURES = ("answers", "latencies", "latency_sum")
# Per (cell, probe, model, validity, anchor interval): the hallucinated values of the answers
# `results` picks that fell between those needles (the hallucination heatmaps' counts).
INVENTED = pa.schema(
    [
        ("cell_id", pa.string()),
        ("probe", pa.string()),
        ("model", pa.string()),
        ("validity", pa.string()),
        ("key_from", pa.int64()),
        ("key_to", pa.int64()),
        ("hallucinations", pa.int64()),
    ]
)
# The (epoch, config) pairs of `results`: a config's axes (figures.AXES), or its cell id when
# the cell was not written when the pair was counted (then the axes are NULL).
EPOCHS = pa.schema(
    [
        ("epoch", pa.string()),
        ("probe", pa.string()),
        ("model", pa.string()),
        ("length_unit", pa.string()),
        ("length", pa.int64()),
        ("needle_count", pa.int64()),
        ("filler", pa.string()),
        ("prompt_version", pa.string()),
        ("placement", pa.string()),
        ("region", pa.string()),
        ("cell_id", pa.string()),
    ]
)


def rollups_root(root: Path) -> Path:
    return root / ROLLUPS


@dataclass(frozen=True)
class Generation:
    path: Path
    attempts: tuple[Path, ...]
    tallies: tuple[Path, ...]
    answers: tuple[Path, ...]
    epochs: tuple[Path, ...]
    invented: tuple[Path, ...]
    covered: Mapping[str, frozenset[Path]]
    # attempts with needle or hallucination rows in covered files but no answer when they were
    # covered (a batch being written, or a crash's leftovers): if their answer comes, they count
    pending: tuple[tuple[str, str, str], ...] = ()

    @property
    def files(self) -> set[Path]:
        return {*self.attempts, *self.tallies, *self.answers, *self.epochs, *self.invented}


@dataclass
class Split:
    """What a reader reads of the rollups for its snapshot: the generation's data files, and
    per covered table its files the generation covers and the fresh ones."""

    attempts: list[Path] = field(default_factory=list)
    tallies: list[Path] = field(default_factory=list)
    answers: list[Path] = field(default_factory=list)
    epochs: list[Path] = field(default_factory=list)
    invented: list[Path] = field(default_factory=list)
    covered: dict[str, list[Path]] = field(default_factory=dict)
    fresh: dict[str, list[Path]] = field(default_factory=dict)
    pending: list[tuple[str, str, str]] = field(default_factory=list)
    used: bool = False  # False: no usable generation, every file is fresh

    @property
    def settled(self) -> bool:
        """The generation covers every file of the snapshot: nothing was appended since."""
        return self.used and all(
            p.name == EMPTY_FILE for table in COVERED_TABLES for p in self.fresh.get(table, [])
        )


def current(root: Path) -> Generation | None:
    """The generation ``current.json`` names, or None (none yet, or of another format)."""
    folder = rollups_root(root)
    try:
        name = json.loads((folder / CURRENT).read_text(encoding="utf-8"))["generation"]
        body = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if body.get("format") != FORMAT:
        return None
    return Generation(
        path=folder / name,
        attempts=tuple(root / p for p in body["attempts"]),
        tallies=tuple(root / p for p in body["tallies"]),
        answers=tuple(root / p for p in body["answers"]),
        epochs=tuple(root / p for p in body["epochs"]),
        invented=tuple(root / p for p in body["invented"]),
        covered={
            t: frozenset(root / p for p in body["covered"].get(t, [])) for t in COVERED_TABLES
        },
        pending=tuple((str(r), str(e), str(c)) for r, e, c in body.get("pending", [])),
    )


def split(root: Path, snap: Snapshot, gen: Generation | None) -> Split:
    """The reader's split of ``snap`` by ``gen``; everything fresh when ``gen`` is None or does
    not match the snapshot (then the views count every row from the raw tables)."""
    whole = Split(
        covered={t: [] for t in COVERED_TABLES},
        fresh={t: list(snap.files.get(t, [])) for t in COVERED_TABLES},
    )
    if gen is None or not all(p.is_file() for p in gen.files):
        return whole
    merged_from = {m.merged: m for m in manifests(root)}
    parts = Split(
        attempts=list(gen.attempts),
        tallies=list(gen.tallies),
        answers=list(gen.answers),
        epochs=list(gen.epochs),
        invented=list(gen.invented),
        pending=list(gen.pending),
        used=True,
    )
    for table in COVERED_TABLES:
        covered, fresh, seen = _covered(snap.files.get(table, []), gen.covered[table], merged_from)
        if seen != gen.covered[table]:
            return whole  # rows the tallies count are not in the snapshot: they disagree
        parts.covered[table], parts.fresh[table] = covered, fresh
    return parts


def _covered(
    files: Iterable[Path], covered: frozenset[Path], merged_from: Mapping[Path, Manifest]
) -> tuple[list[Path], list[Path], set[Path]]:
    """(covered files, fresh files, the generation's files they hold). A merged file holding
    covered and fresh rows reads as fresh: its covered attempts then show up twice, as
    rollup attempts and fresh ones, and pick the same (tallies.sql)."""
    inside: list[Path] = []
    fresh: list[Path] = []
    seen: set[Path] = set()

    def held(path: Path) -> tuple[set[Path], bool]:
        """The generation's files ``path`` holds, and whether it holds other rows too."""
        if path in covered:
            return {path}, False
        manifest = merged_from.get(path)
        if manifest is None:
            return set(), True
        found: set[Path] = set()
        other = False
        for source in manifest.sources:
            got, more = held(source)
            found |= got
            other = other or more
        return found, other

    for path in files:
        got, other = held(path)
        seen |= got
        if path.name == EMPTY_FILE or other or not got:
            fresh.append(path)
        else:
            inside.append(path)
    return inside, fresh, seen


# ------------------------------------------------------------------------------ the SQL


def _read(files: list[Path], schema: pa.Schema, variable: str) -> tuple[str, list[str] | None]:
    """A subquery over ``files`` through a variable (set by :func:`use_split`), or a typed empty
    relation when there are none."""
    if not files:
        return _empty(schema), None
    return (
        f"(SELECT * FROM read_parquet(getvariable('{variable}'), union_by_name = true))",
        [p.as_posix() for p in files],
    )


def pending_sql(keys: list[tuple[str, str, str]]) -> str:
    if not keys:
        columns = ", ".join(f"NULL::VARCHAR AS {c}" for c in ("run_id", "epoch", "cell_id"))
        return f"(SELECT {columns} WHERE false)"
    rows = ", ".join("(" + ", ".join(sql_text(v) for v in key) + ")" for key in keys)
    return f"(SELECT * FROM (VALUES {rows}) AS p(run_id, epoch, cell_id))"


def _empty(schema: pa.Schema) -> str:
    columns = ", ".join(f'CAST(NULL AS {_sql_type(f.type)}) AS "{f.name}"' for f in schema)
    return f"(SELECT {columns} WHERE false)"


def _sql_type(kind: pa.DataType) -> str:
    if pa.types.is_string(kind):
        return "VARCHAR"
    if pa.types.is_int64(kind) or pa.types.is_int32(kind):
        return "BIGINT"
    if pa.types.is_boolean(kind):
        return "BOOLEAN"
    if pa.types.is_float64(kind):
        return "DOUBLE"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMPTZ"
    raise TypeError(kind)


def summed_sql(schema: pa.Schema, measures: tuple[str, ...], source: str) -> str:
    """``source``'s rows summed per key (every column of ``schema`` but ``measures``), rows
    whose first measure sums to nothing dropped."""
    keys = ", ".join(f'"{f.name}"' for f in schema if f.name not in measures)
    sums = ", ".join(
        f'sum("{m}")::{"DOUBLE" if schema.field(m).type == pa.float64() else "BIGINT"} AS "{m}"'
        for m in measures
    )
    return f'SELECT {keys}, {sums} FROM {source} GROUP BY ALL HAVING sum("{measures[0]}") <> 0'


# The views tallies.sql sums over the rollup and the fresh files' delta: their delta view, the
# rollup kind they read, its schema and measures (a row whose first measure sums to 0 is dropped).
SUMMED_VIEWS = {
    "needle_tallies": ("tally_delta", "tallies", TALLIES, MEASURES),
    "answer_tallies": ("answer_delta", "answers", ANSWER_TALLIES, ANSWER_MEASURES),
    "hallucination_tallies": ("invented_delta", "invented", INVENTED, ("hallucinations",)),
}
# The tallies' size follows the grid (cells × needles), not the answers: each generation keeps
# one file of each (a delta merged in at once, ~1.6 s at 10M answers), so a reader of a settled
# snapshot reads them as they are, with nothing to sum.
MERGED_AT_ONCE = tuple(kind for _, kind, _, _ in SUMMED_VIEWS.values())


def _settled_sql(parts: Split, reads: Mapping[str, str]) -> str:
    """The views of a settled snapshot (``reads``: each rollup kind's subquery): no fresh file,
    so no delta (an empty relation, not a plan over the covered files), and each tally view
    is its rollup as written — summed only when a generation holds several files of it (one
    written before MERGED_AT_ONCE). The same rows as tallies.sql's, at a fraction of the cost:
    every report and query over the tallies read them."""
    statements = []
    for view, (delta, kind, schema, measures) in SUMMED_VIEWS.items():
        source = reads[kind]
        rows = (
            f'SELECT * FROM {source} WHERE "{measures[0]}" <> 0'
            if len(getattr(parts, kind)) <= 1
            else summed_sql(schema, measures, source)
        )
        statements.append(f"CREATE OR REPLACE VIEW {delta} AS SELECT * FROM {_empty(schema)};")
        statements.append(f"CREATE OR REPLACE VIEW {view} AS {rows};")
    return "\n".join(statements)


def tallies_sql(
    parts: Split, live_from: tuple[Path, Snapshot] | None = None
) -> tuple[str, dict[str, list[str]]]:
    """``tallies.sql`` for ``parts``: its placeholders replaced by subqueries, and the
    file lists to set as variables (for a settled snapshot, :func:`_settled_sql` after it).
    ``live_from``: every file fresh, read by the globs of the views file of the ``duckdb``
    CLI (compaction.table_sql)."""
    variables: dict[str, list[str]] = {}
    text = resources.files("needlescope.warehouse.store").joinpath("tallies.sql").read_text()
    reads = {
        "rollup:attempts": (parts.attempts, ATTEMPTS),
        "rollup:tallies": (parts.tallies, TALLIES),
        "rollup:answers": (parts.answers, ANSWER_TALLIES),
        "rollup:epochs": (parts.epochs, EPOCHS),
        "rollup:invented": (parts.invented, INVENTED),
        **{
            f"{kind}:{table}": (getattr(parts, kind)[table], TABLES[table])
            for kind in ("covered", "fresh")
            for table in COVERED_TABLES
        },
    }
    text = text.replace("{rollup:pending}", pending_sql(parts.pending if live_from is None else []))
    subqueries: dict[str, str] = {}
    for name, (files, schema) in reads.items():
        kind, table = name.split(":")
        if live_from is not None:
            sql = table_sql(table, live_from=live_from) if kind == "fresh" else _empty(schema)
        else:
            variable = f"needlescope_{kind}_{table}"
            sql, listed = _read(files, schema, variable)
            if listed is not None:
                variables[variable] = listed
        subqueries[name] = sql
        text = text.replace("{" + name + "}", sql)
    if live_from is None and parts.settled:
        rollup = {k.split(":")[1]: v for k, v in subqueries.items() if k.startswith("rollup:")}
        text += "\n" + _settled_sql(parts, rollup)
    return text, variables


def use_split(con: duckdb.DuckDBPyConnection, parts: Split) -> None:
    """Create the ``needle_tallies`` view (and its helpers) on ``con`` for ``parts``."""
    text, variables = tallies_sql(parts)
    for name, files in variables.items():
        con.execute(f"SET VARIABLE {name} = ?", [files])
    con.execute(text)
