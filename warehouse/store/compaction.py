"""Compaction: many small append files merged into a few large ones, under live readers.

Each folder's append files (``parquet/<table>/<probe>/<model>/``) are merged into one file under
``compacted/<table>/<probe>/<model>/``: written hidden and synced, named with its sources in a
manifest (``compacted/_manifests/<id>.json``), then renamed into place (its manifest is then
*live*). A reader reads exactly the files of its :class:`Snapshot`, so a merge never changes
what it sees; sources are deleted a grace period later. Writers are never blocked; one
compaction at a time per warehouse (a lock file).

Design: docs/design/warehouse.md#compaction
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from needlescope.warehouse.store.schema import TABLES
from needlescope.warehouse.store.tiers import tiered

COMPACTED = "compacted"
MANIFESTS = "_manifests"
EMPTY_FILE = "_empty.parquet"
VIEWS_MARK = ".views_snapshot"  # when the views file's snapshot was taken (refresh_views_file)
DEFAULT_MIN_FILES = 8  # a folder with fewer append files is left as it is
DEFAULT_MAX_COMPACTED = 8  # past this many compacted files a folder's smallest merge (tiered)
DEFAULT_GRACE_S = 3600.0  # superseded files stay this long for readers that listed them
ROW_GROUP_ROWS = 122_880  # DuckDB scans a file in parallel by row group


@dataclass(frozen=True)
class Manifest:
    path: Path
    merged: Path
    sources: tuple[Path, ...]

    @property
    def live(self) -> bool:
        return self.merged.is_file()

    def live_since(self) -> float:
        return self.merged.stat().st_mtime


@dataclass(frozen=True)
class Snapshot:
    """What a reader reads, per table: ``files``, every file to read (append files not merged
    away, compacted files, the empty schema file), and ``superseded``, the append files merged
    away but still on disk (what a glob over the append folders must leave out)."""

    files: dict[str, list[Path]] = field(default_factory=dict)
    superseded: dict[str, list[Path]] = field(default_factory=dict)


def compacted_root(root: Path) -> Path:
    return root / COMPACTED


def manifests(root: Path) -> list[Manifest]:
    folder = compacted_root(root) / MANIFESTS
    if not folder.is_dir():
        return []
    found: list[Manifest] = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being deleted, or left half-written by a crash before its rename
        found.append(
            Manifest(
                path=path,
                merged=root / data["merged"],
                sources=tuple(root / source for source in data["sources"]),
            )
        )
    return found


def snapshot(root: Path, tables: Sequence[str] = tuple(TABLES)) -> Snapshot:
    """The files to read of ``tables`` (all by default), as of now."""
    root = root.resolve()  # DuckDB names files by absolute paths
    # Compacted files are listed before the manifests are read, and append files after: a
    # merged file in the list had its manifest written before it appeared, so its sources are
    # left out whenever it is read; a merged file not in the list leaves its sources in.
    listed = {table: sorted((compacted_root(root) / table).rglob("*.parquet")) for table in tables}
    present = {path for files in listed.values() for path in files}
    gone = {source for m in manifests(root) if m.merged in present for source in m.sources}
    files: dict[str, list[Path]] = {}
    superseded: dict[str, list[Path]] = {}
    for table in tables:
        appended = sorted((root / "parquet" / table).rglob("*.parquet"))
        files[table] = [f for f in (*appended, *listed[table]) if f not in gone]
        superseded[table] = [f for f in appended if f in gone]
    return Snapshot(files, superseded)


def files_variable(table: str) -> str:
    return f"needlescope_files_{table}"


def use_snapshot(
    con: duckdb.DuckDBPyConnection, snap: Snapshot, tables: Sequence[str] = tuple(TABLES)
) -> None:
    """Point ``con``'s table reads (:func:`table_sql`) at ``snap``'s files."""
    for table in tables:
        files = [p.as_posix() for p in snap.files.get(table, [])]
        con.execute(f"SET VARIABLE {files_variable(table)} = ?", [files])


def sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def table_sql(table: str, *, live_from: tuple[Path, Snapshot] | None = None) -> str:
    """A subquery reading ``table``. By default the files of the connection's snapshot (the
    variable :func:`files_variable` holds them): a reader never opens a file merged away
    before it connected. With ``live_from`` (the parquet folder and a snapshot), a glob over
    the append folders that sees later appends too, leaving out the snapshot's superseded
    files, plus its compacted files: for the views file of the ``duckdb`` CLI."""
    if live_from is None:
        files = f"getvariable('{files_variable(table)}')"
        return f"(SELECT * FROM read_parquet({files}, union_by_name = true))"
    parquet, snap = live_from
    compacted = [f for f in snap.files.get(table, []) if not f.is_relative_to(parquet)]
    sources = [(parquet / table / "**" / "*.parquet").as_posix(), *map(Path.as_posix, compacted)]
    listed = ", ".join(map(sql_text, sources))
    excluded = snap.superseded.get(table, [])
    if not excluded:
        return f"(SELECT * FROM read_parquet([{listed}], union_by_name = true))"
    # A constant filter on `filename` prunes files before their rows are read.
    names = ", ".join(sql_text(p.as_posix()) for p in excluded)
    return (
        f"(SELECT * EXCLUDE (filename) FROM read_parquet([{listed}], union_by_name = true, "
        f"filename = true) WHERE filename NOT IN ({names}))"
    )


# ----------------------------------------------------------------------------- compacting


@dataclass
class TableCompaction:
    table: str
    folders: int = 0
    files_merged: int = 0
    rows: int = 0
    files_deleted: int = 0


@dataclass
class CompactionReport:
    ran: bool
    tables: list[TableCompaction] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def files_merged(self) -> int:
        return sum(t.files_merged for t in self.tables)

    @property
    def files_deleted(self) -> int:
        return sum(t.files_deleted for t in self.tables)


@contextmanager
def exclusive(root: Path) -> Iterator[bool]:
    folder = compacted_root(root)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def views_snapshot_time(root: Path) -> float:
    """When the views file's snapshot was taken (0 when it never was)."""
    try:
        return float((root / VIEWS_MARK).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0.0


def mark_views_snapshot(root: Path, taken_at: float) -> None:
    _replace_text(root / VIEWS_MARK, repr(taken_at))


def _replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a synced temporary file renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def compact(
    root: Path,
    *,
    min_files: int = DEFAULT_MIN_FILES,
    max_compacted: int = DEFAULT_MAX_COMPACTED,
    grace_s: float = DEFAULT_GRACE_S,
    tables: Sequence[str] = tuple(TABLES),
    roll_up: Callable[[Snapshot], object] | None = None,
) -> CompactionReport:
    """Delete what expired, then merge every folder with at least ``min_files`` append files
    (and the smallest files of every folder with more than ``max_compacted``: ``tiered``).
    ``roll_up`` (the rollups' update) runs under the same lock before the merges and after
    them: the merged files then hold only rows the rollups cover."""
    started = time.monotonic()
    root = root.resolve()
    with exclusive(root) as mine:
        if not mine:
            return CompactionReport(ran=False)
        report = CompactionReport(ran=True, tables=[TableCompaction(t) for t in tables])
        by_table = {t.table: t for t in report.tables}
        _drop_expired(root, grace_s, by_table)
        snap = snapshot(root)
        if roll_up is not None:
            roll_up(snap)
        for table in tables:
            _compact_table(root, table, snap, min_files, max_compacted, by_table[table])
        if roll_up is not None and report.files_merged:
            roll_up(snapshot(root))
    report.seconds = time.monotonic() - started
    return report


def _drop_expired(root: Path, grace_s: float, by_table: dict[str, TableCompaction]) -> None:
    # Under the lock no other compaction runs: whatever it left half-done is a crash's.
    for stale in (
        *compacted_root(root).rglob(".c-*.partial"),
        *compacted_root(root).rglob(".*.tmp"),
    ):
        stale.unlink(missing_ok=True)
    views_at = views_snapshot_time(root) if (root / "needlescope.duckdb").exists() else None
    now = time.time()
    for manifest in manifests(root):
        if not manifest.live:
            manifest.path.unlink(missing_ok=True)  # never went live: its sources are the truth
            continue
        since = manifest.live_since()
        if now - since < grace_s or (views_at is not None and views_at < since):
            continue
        table = manifest.merged.relative_to(compacted_root(root)).parts[0]
        for source in manifest.sources:
            if source.exists():
                source.unlink()
                if table in by_table:
                    by_table[table].files_deleted += 1
        # A reader lists the compacted files before it reads the manifests: one that listed a
        # source just deleted (itself a compacted file) learns from this manifest that it is
        # gone. So the manifest outlives its sources by another grace period.
        if now - since >= 2 * grace_s:
            manifest.path.unlink(missing_ok=True)


def partial_of(target: Path) -> Path:
    """Where a Parquet file is written before its rename: hidden, never matched as data."""
    return target.with_name(f".{target.name}.partial")


def _compact_table(
    root: Path,
    table: str,
    snap: Snapshot,
    min_files: int,
    max_compacted: int,
    tally: TableCompaction,
) -> None:
    appended = root / "parquet" / table
    if not appended.is_dir():
        return
    merged_root = compacted_root(root) / table
    merged_by_folder: dict[Path, list[Path]] = {}
    fresh_by_folder: dict[Path, list[Path]] = {}
    for path in snap.files.get(table, []):
        if path.is_relative_to(merged_root):
            merged_by_folder.setdefault(path.parent.relative_to(merged_root), []).append(path)
        elif path.name != EMPTY_FILE:
            fresh_by_folder.setdefault(path.parent.relative_to(appended), []).append(path)
    for folder in sorted(set(fresh_by_folder) | set(merged_by_folder)):
        fresh = fresh_by_folder.get(folder, [])
        merged = merged_by_folder.get(folder, [])
        adds = len(fresh) >= min_files
        if len(merged) + adds > max_compacted and len(merged) + len(fresh) > 1:
            merges = tiered(merged, fresh if adds else [], max_compacted)
        elif adds:
            merges = [fresh]
        else:
            continue
        for sources in merges:
            tally.rows += _merge(root, table, folder, sources)
            tally.files_merged += len(sources)
        tally.folders += 1


def _merge(root: Path, table: str, folder: Path, sources: Sequence[Path]) -> int:
    schema = TABLES[table]
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}"
    merged = (
        compacted_root(root)
        / table
        / folder
        / f"c-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
    )
    merged.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_of(merged)
    rows = 0
    with pq.ParquetWriter(partial, schema, compression="zstd") as writer:
        pending: list[pa.Table] = []
        pending_rows = 0
        for source in sources:
            # one file, read as such: read_table's dataset machinery costs more than the read
            with pq.ParquetFile(source) as one:
                part = _conformed(one.read(), schema)
            pending.append(part)
            pending_rows += part.num_rows
            if pending_rows >= ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                rows += pending_rows
                pending, pending_rows = [], 0
        if pending:
            writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
            rows += pending_rows
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    _write_manifest(root, merged, sources)
    os.replace(partial, merged)  # the merge goes live: readers from now on skip the sources
    # Its mtime marks when it went live (Manifest.live_since): a views-file refresh that began
    # before this instant may have listed the folder without it, and must not count as past it.
    os.utime(merged)
    return rows


def _conformed(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` in ``schema``'s columns: an older file's missing columns are nulls."""
    columns = [
        data.column(f.name).cast(f.type)
        if f.name in data.column_names
        else pa.nulls(data.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _write_manifest(root: Path, merged: Path, sources: Sequence[Path]) -> None:
    folder = compacted_root(root) / MANIFESTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{merged.stem}.json"
    body = {
        "merged": merged.relative_to(root).as_posix(),
        "sources": [s.relative_to(root).as_posix() for s in sources],
        "created_at": datetime.now(UTC).isoformat(),
    }
    _replace_text(path, json.dumps(body))
