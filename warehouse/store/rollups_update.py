"""Writing the rollups' generations (rollups.py says what they are): the last generation plus
a delta of the fresh files, or one derived from the raw tables alone; the tallies' deltas
merged at once, the attempts' when there are many; generations a reader may still use kept for
a grace period. Runs under the compaction lock (compaction calls it before and after its
merges), so one writer at a time."""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.warehouse.store import compaction, views
from needlescope.warehouse.store.compaction import (
    EMPTY_FILE,
    CompactionReport,
    Snapshot,
    _replace_text,
)
from needlescope.warehouse.store.figures import AXES, result_axes
from needlescope.warehouse.store.rollups import (
    ANSWER_TALLIES,
    ATTEMPTS,
    COVERED_TABLES,
    CURRENT,
    DATA,
    EPOCHS,
    FORMAT,
    INVENTED,
    MAX_DELTAS,
    MERGED_AT_ONCE,
    SUMMED_VIEWS,
    TALLIES,
    Split,
    current,
    pending_sql,
    rollups_root,
    split,
    summed_sql,
    use_split,
)


@dataclass
class RollupReport:
    fresh_files: int = 0
    attempts: int = 0
    tally_rows: int = 0
    answer_rows: int = 0
    invented_rows: int = 0
    merged: bool = False
    rebuilt: bool = False
    seconds: float = 0.0


def update(
    root: Path, snap: Snapshot, *, rebuild: bool = False, grace_s: float = 3600.0
) -> RollupReport:
    """Write the generation that covers ``snap`` (called under the compaction lock): the last
    one plus a delta of the fresh files, or (``rebuild``, or no usable generation) one counted
    from the raw tables alone. Generations and data files no longer current are deleted after
    ``grace_s`` (a reader may still be reading them)."""
    started = time.monotonic()
    root = root.resolve()
    folder = rollups_root(root)
    (folder / DATA).mkdir(parents=True, exist_ok=True)
    parts = split(root, snap, None if rebuild else current(root))
    report = RollupReport(rebuilt=not parts.used)
    report.fresh_files = sum(
        1 for t in COVERED_TABLES for p in parts.fresh[t] if p.name != EMPTY_FILE
    )
    files = {
        "attempts": list(parts.attempts),
        "tallies": list(parts.tallies),
        "answers": list(parts.answers),
        "epochs": list(parts.epochs),
        "invented": list(parts.invented),
    }
    pending = list(parts.pending)
    if report.fresh_files or not parts.used:
        fresh, pending = _count_fresh(snap, parts)
        report.attempts, report.tally_rows = fresh["attempts"].num_rows, fresh["tallies"].num_rows
        report.answer_rows = fresh["answers"].num_rows
        report.invented_rows = fresh["invented"].num_rows
        for kind, data in fresh.items():
            if data.num_rows:
                files[kind].append(_write(folder, kind, data.cast(SCHEMAS[kind])))
    many = any(len(paths) > MAX_DELTAS for paths in files.values())
    merging = [k for k, paths in files.items() if len(paths) > 1 and (many or k in MERGED_AT_ONCE)]
    if merging:
        files = _merge_deltas(folder, files, merging)
        report.merged = True
    gen = _write_generation(root, parts, files, pending)
    _drop_old(root, gen, {p for paths in files.values() for p in paths}, grace_s)
    report.seconds = time.monotonic() - started
    return report


SCHEMAS = {
    "attempts": ATTEMPTS,
    "tallies": TALLIES,
    "answers": ANSWER_TALLIES,
    "epochs": EPOCHS,
    "invented": INVENTED,
}


# A new (epoch, cell) pair keyed by its config's axes (as `results` has them), or by its cell
# id while its cell is not in the snapshot.
_NEW_EPOCHS = f"""
SELECT DISTINCT k.epoch, {result_axes(AXES, answer="k")},
       CASE WHEN c.cell_id IS NULL THEN k.cell_id END AS cell_id
FROM new_epochs k LEFT JOIN cells c ON c.cell_id = k.cell_id
"""


def _count_fresh(
    snap: Snapshot, parts: Split
) -> tuple[dict[str, pa.Table], list[tuple[str, str, str]]]:
    """What the fresh files add, by kind (their attempts the rollup does not hold yet, the
    needle, answer and hallucination tally deltas, the new (epoch, config) pairs), and the
    attempts still pending."""
    con = duckdb.connect()
    try:
        compaction.use_snapshot(con, snap)
        use_split(con, parts)
        # the new epochs' axes need only these two (all the views would cost a second)
        con.execute(views.some_views_sql(("cells", "result_region")))
        # the deltas read the changed picks: find them once (a window over every
        # attempt of the touched cells; every attempt when rebuilding)
        con.execute("CREATE TEMP TABLE changes AS SELECT * FROM pick_changes")
        con.execute("CREATE OR REPLACE VIEW pick_changes AS SELECT * FROM changes")
        data = {
            "attempts": con.sql(
                """
                SELECT * FROM fresh_attempts f WHERE NOT EXISTS (
                    SELECT 1 FROM tally_attempts a
                    WHERE a.run_id = f.run_id AND a.epoch = f.epoch AND a.cell_id = f.cell_id
                      AND a.answered_at = f.answered_at
                )
                """
            ).to_arrow_table(),
            "tallies": con.sql("SELECT * FROM tally_delta").to_arrow_table(),
            "answers": con.sql("SELECT * FROM answer_delta WHERE answers <> 0").to_arrow_table(),
            "epochs": con.sql(_NEW_EPOCHS).to_arrow_table(),
            "invented": con.sql(
                "SELECT * FROM invented_delta WHERE hallucinations <> 0"
            ).to_arrow_table(),
        }
        return data, _still_pending(con, list(parts.pending))
    finally:
        con.close()


def _write_generation(
    root: Path, parts: Split, files: dict[str, list[Path]], pending: list[tuple[str, str, str]]
) -> Path:
    """The new generation, covering every file of the snapshot, made current."""
    folder = rollups_root(root)
    covered = {
        t: sorted(
            p.relative_to(root).as_posix()
            for p in (*parts.covered[t], *parts.fresh[t])
            if p.name != EMPTY_FILE
        )
        for t in COVERED_TABLES
    }
    name = f"gen-{time.time_ns()}-{uuid.uuid4().hex[:8]}.json"
    body = {
        "format": FORMAT,
        **{kind: [p.relative_to(root).as_posix() for p in paths] for kind, paths in files.items()},
        "covered": covered,
        "pending": [list(key) for key in pending],
    }
    _replace_text(folder / name, json.dumps(body))
    _replace_text(folder / CURRENT, json.dumps({"generation": name}))
    return folder / name


def _still_pending(
    con: duckdb.DuckDBPyConnection, pending: list[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """The attempts with needle or hallucination rows (in the files the new generation covers)
    and no answer the rollup or the fresh files know: the last generation's, and the fresh
    needle and hallucination files'."""
    rows = con.execute(
        """
        WITH keys AS (
            SELECT run_id, epoch, cell_id FROM {fresh}
            UNION SELECT run_id, epoch, cell_id FROM fresh_invented_rows
            UNION SELECT run_id, epoch, cell_id FROM {pending}
        )
        SELECT run_id, epoch, cell_id FROM keys k
        WHERE NOT EXISTS (
            SELECT 1 FROM fresh_attempts f
            WHERE f.run_id = k.run_id AND f.epoch = k.epoch AND f.cell_id = k.cell_id
        )
        AND NOT EXISTS (
            SELECT 1 FROM tally_attempts a
            WHERE a.run_id = k.run_id AND a.epoch = k.epoch AND a.cell_id = k.cell_id
        )
        ORDER BY ALL
        """.format(fresh="fresh_needle_rows", pending=pending_sql(pending))
    ).fetchall()
    return [(str(r), str(e), str(c)) for r, e, c in rows]


def _write(folder: Path, kind: str, data: pa.Table) -> Path:
    target = folder / DATA / f"{kind}-{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
    partial = target.with_name(f".{target.name}.partial")
    pq.write_table(data, partial, compression="zstd", row_group_size=122_880)
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, target)
    return target


def _merge_deltas(
    folder: Path, files: dict[str, list[Path]], kinds: list[str]
) -> dict[str, list[Path]]:
    """The deltas of each of ``kinds`` as one file: tallies summed by key (rows that sum to
    nothing dropped), attempts and epochs as they are (epochs once each)."""
    merging = {
        "attempts": "SELECT * FROM read_parquet($files) ORDER BY epoch, cell_id",
        "epochs": "SELECT DISTINCT * FROM read_parquet($files) ORDER BY ALL",
        **{kind: _summed(schema, measures) for _, kind, schema, measures in SUMMED_VIEWS.values()},
    }
    con = duckdb.connect()
    try:
        merged: dict[str, list[Path]] = {}
        for kind, paths in files.items():
            if len(paths) <= 1 or kind not in kinds:
                merged[kind] = list(paths)
                continue
            rows = con.sql(
                merging[kind], params={"files": [p.as_posix() for p in paths]}
            ).to_arrow_table()
            merged[kind] = [_write(folder, kind, rows.cast(SCHEMAS[kind]))]
    finally:
        con.close()
    return merged


def _summed(schema: pa.Schema, measures: tuple[str, ...]) -> str:
    # a needle tally with no needles left has nothing else left either; an answer tally's
    # latency sum may keep a rounding residue when its answers cancel out
    keys = ", ".join(f'"{f.name}"' for f in schema if f.name not in measures)
    source = "read_parquet($files, union_by_name = true)"
    return f"{summed_sql(schema, measures, source)} ORDER BY {keys}"


def _drop_old(root: Path, keep_gen: Path, keep_files: set[Path], grace_s: float) -> None:
    """Delete generations superseded at least ``grace_s`` ago, then the data files no
    remaining generation names (a reader that took an older generation keeps reading it)."""
    folder = rollups_root(root)
    now = time.time()
    gens = sorted(folder.glob("gen-*.json"), key=lambda p: p.name)
    remaining = [keep_gen]
    for older, newer in itertools.pairwise(gens):
        if older == keep_gen:
            continue
        try:
            superseded_at = newer.stat().st_mtime
        except FileNotFoundError:
            continue
        if now - superseded_at >= grace_s:
            older.unlink(missing_ok=True)
        else:
            remaining.append(older)
    named = set(keep_files)
    for gen in remaining:
        try:
            body = json.loads(gen.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        named |= {root / p for kind in SCHEMAS for p in body.get(kind, [])}
    for path in (folder / DATA).glob("*.parquet"):
        if path not in named:
            path.unlink(missing_ok=True)
    for stale in (folder / DATA).glob(".*.partial"):
        stale.unlink(missing_ok=True)


def compact(
    root: Path,
    *,
    min_files: int = compaction.DEFAULT_MIN_FILES,
    max_compacted: int = compaction.DEFAULT_MAX_COMPACTED,
    grace_s: float = compaction.DEFAULT_GRACE_S,
) -> tuple[CompactionReport, list[RollupReport]]:
    """Compaction with the rollups kept up to date (what sweeps run when they end)."""
    done: list[RollupReport] = []

    def roll_up(snap: Snapshot) -> None:
        done.append(update(root, snap, grace_s=grace_s))

    report = compaction.compact(
        root, min_files=min_files, max_compacted=max_compacted, grace_s=grace_s, roll_up=roll_up
    )
    return report, done
