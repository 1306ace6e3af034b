"""Writing the rollups' generations (rollups.py says what they are): the last generation plus
a delta of the fresh files, or one derived from the raw tables alone; deltas merged when there
are many; generations a reader may still use kept for a grace period. Runs under the
compaction lock (compaction calls it before and after its merges), so one writer at a time."""

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

from needlescope.warehouse.store import compaction
from needlescope.warehouse.store.compaction import (
    EMPTY_FILE,
    CompactionReport,
    Snapshot,
    _replace_text,
)
from needlescope.warehouse.store.rollups import (
    ATTEMPTS,
    COVERED_TABLES,
    CURRENT,
    DATA,
    FORMAT,
    MAX_DELTAS,
    MEASURES,
    TALLIES,
    Split,
    current,
    pending_sql,
    rollups_root,
    split,
    use_split,
)


@dataclass
class RollupReport:
    fresh_files: int = 0
    attempts: int = 0
    tally_rows: int = 0
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
    attempts, tallies, pending = list(parts.attempts), list(parts.tallies), list(parts.pending)
    if report.fresh_files or not parts.used:
        new_attempts, delta, pending = _count_fresh(parts)
        report.attempts, report.tally_rows = new_attempts.num_rows, delta.num_rows
        if new_attempts.num_rows:
            attempts.append(_write(folder, "attempts", new_attempts.cast(ATTEMPTS)))
        if delta.num_rows:
            tallies.append(_write(folder, "tallies", delta.cast(TALLIES)))
    if len(tallies) > MAX_DELTAS or len(attempts) > MAX_DELTAS:
        attempts, tallies = _merge_deltas(folder, attempts, tallies)
        report.merged = True
    gen = _write_generation(root, parts, attempts, tallies, pending)
    _drop_old(root, gen, {*attempts, *tallies}, grace_s)
    report.seconds = time.monotonic() - started
    return report


def _count_fresh(parts: Split) -> tuple[pa.Table, pa.Table, list[tuple[str, str, str]]]:
    """The fresh files' attempts the rollup does not hold yet, their tally delta, and the
    attempts still pending."""
    con = duckdb.connect()
    try:
        use_split(con, parts)
        attempts = con.sql(
            """
            SELECT * FROM fresh_attempts f WHERE NOT EXISTS (
                SELECT 1 FROM tally_attempts a
                WHERE a.run_id = f.run_id AND a.epoch = f.epoch AND a.cell_id = f.cell_id
                  AND a.answered_at = f.answered_at
            )
            """
        ).to_arrow_table()
        delta = con.sql("SELECT * FROM tally_delta").to_arrow_table()
        return attempts, delta, _still_pending(con, list(parts.pending))
    finally:
        con.close()


def _write_generation(
    root: Path,
    parts: Split,
    attempts: list[Path],
    tallies: list[Path],
    pending: list[tuple[str, str, str]],
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
        "attempts": [p.relative_to(root).as_posix() for p in attempts],
        "tallies": [p.relative_to(root).as_posix() for p in tallies],
        "covered": covered,
        "pending": [list(key) for key in pending],
    }
    _replace_text(folder / name, json.dumps(body))
    _replace_text(folder / CURRENT, json.dumps({"generation": name}))
    return folder / name


def _still_pending(
    con: duckdb.DuckDBPyConnection, pending: list[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """The attempts with needle rows (in the files the new generation covers) and no answer
    the rollup or the fresh files know: the last generation's, and the fresh needle files'."""
    rows = con.execute(
        """
        WITH keys AS (
            SELECT run_id, epoch, cell_id FROM {fresh}
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
    folder: Path, attempts: list[Path], tallies: list[Path]
) -> tuple[list[Path], list[Path]]:
    """The deltas as one attempts file and one tallies file (counts summed by key)."""
    con = duckdb.connect()
    try:
        keys = ", ".join(f'"{f.name}"' for f in TALLIES if f.name not in MEASURES)
        sums = ", ".join(f'sum("{m}")::BIGINT AS "{m}"' for m in MEASURES)
        nonzero = " OR ".join(f'sum("{m}") <> 0' for m in MEASURES)
        out_tallies: list[Path] = []
        if tallies:
            merged = con.sql(
                f"SELECT {keys}, {sums} FROM read_parquet($files) GROUP BY ALL HAVING {nonzero}"
                f" ORDER BY {keys}",
                params={"files": [p.as_posix() for p in tallies]},
            ).to_arrow_table()
            out_tallies = [_write(folder, "tallies", merged.cast(TALLIES))]
        out_attempts: list[Path] = []
        if attempts:
            rows = con.sql(
                "SELECT * FROM read_parquet($files) ORDER BY epoch, cell_id",
                params={"files": [p.as_posix() for p in attempts]},
            ).to_arrow_table()
            out_attempts = [_write(folder, "attempts", rows.cast(ATTEMPTS))]
    finally:
        con.close()
    return out_attempts, out_tallies


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
        named |= {root / p for p in (*body.get("attempts", []), *body.get("tallies", []))}
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
