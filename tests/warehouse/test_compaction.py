"""Compaction merges small files without a reader ever seeing a row twice or missing one."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from needlescope.flows.cli._app import app
from needlescope.warehouse.store import Warehouse, compaction
from needlescope.warehouse.store.compaction import compact
from needlescope.warehouse.store.schema import TABLES
from needlescope.warehouse.store.tiers import tiered
from tests.support.synthetic_sweep import build_warehouse

CHUNK = 2  # rows per appended file: many small files, as sweeps write them


@pytest.fixture(scope="module")
def one_file_per_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("source")
    build_warehouse(root)
    return root


def split_copy(source: Path, root: Path) -> Warehouse:
    """The source warehouse's rows rewritten as sweeps write them: a file per few rows, in
    parquet/<table>/<probe>/<model>/ folders."""
    store = Warehouse(root).ensure()
    for table in TABLES:
        rows: list[dict[str, Any]] = []
        for path in sorted((source / "parquet" / table).rglob("*.parquet")):
            rows += pq.read_table(path).to_pylist()
        for row in rows:
            row.pop("schema_version")
        by_folder: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            parts = (row["probe"], row["model"]) if "model" in row and "probe" in row else ()
            by_folder.setdefault(parts, []).append(row)
        for parts, folder_rows in by_folder.items():
            for start in range(0, len(folder_rows), CHUNK):
                store.append(table, folder_rows[start : start + CHUNK], parts=parts)
    return store


def observe(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What a reader sees: every table's rows, and the figures the report is built from."""
    seen: dict[str, Any] = {
        view: sorted(map(repr, con.execute(f"SELECT * FROM {view}").fetchall()))
        for view in ("raw_runs", "cells", "answers", "raw_needle_outcomes", "raw_hallucinations")
    }
    seen["results"] = con.execute(
        "SELECT model, epoch, count(*), round(sum(accuracy), 6) FROM results "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    seen["needles"] = con.execute(
        "SELECT outcome, count(*) FROM needle_outcomes GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    return seen


def observe_store(store: Warehouse) -> dict[str, Any]:
    con = store.connect()
    try:
        return observe(con)
    finally:
        con.close()


def appended_files(store: Warehouse) -> list[Path]:
    return [p for p in store.parquet.rglob("*.parquet") if p.name != "_empty.parquet"]


def compacted_files(store: Warehouse) -> list[Path]:
    return list((store.root / "compacted").rglob("*.parquet"))


def test_merged_files_hold_every_row_once(one_file_per_table: Path, tmp_path: Path) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    before = observe_store(store)
    assert before["results"] and before["needles"]
    files = len(appended_files(store))
    assert files > 50

    merged = compact(store.root, min_files=2, grace_s=3600)
    assert merged.ran and merged.files_merged == files and merged.files_deleted == 0
    assert len(compacted_files(store)) < 20
    assert len(appended_files(store)) == files  # kept through the grace period
    assert observe_store(store) == before

    expired = compact(store.root, min_files=2, grace_s=0)
    assert expired.files_deleted == files and expired.files_merged == 0
    assert appended_files(store) == []
    assert not list((store.root / "compacted" / "_manifests").iterdir())
    assert observe_store(store) == before


def test_compacted_files_are_merged_again_past_a_count(
    one_file_per_table: Path, tmp_path: Path
) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    before = observe_store(store)
    # Three nights' worth: a third of the files arrives before each compaction.
    aside = tmp_path / "aside"
    held = {path: aside / str(i) for i, path in enumerate(appended_files(store))}
    aside.mkdir()
    for path, kept in held.items():
        path.rename(kept)
    batches = [list(held.items())[night::3] for night in range(3)]
    for batch in batches:
        for path, kept in batch:
            kept.rename(path)
        compact(store.root, min_files=2, max_compacted=100, grace_s=0)
    folders = {p.parent for p in compacted_files(store)}
    assert len(compacted_files(store)) > len(folders)
    compact(store.root, min_files=1, max_compacted=1, grace_s=0)  # merged into one per folder
    assert compact(store.root, min_files=2, grace_s=0).files_deleted > 0
    assert len(compacted_files(store)) == len(folders)
    assert appended_files(store) == []
    assert observe_store(store) == before


def test_a_reader_keeps_its_snapshot_through_a_merge(
    one_file_per_table: Path, tmp_path: Path
) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    early = store.connect()
    try:
        before = observe(early)
        compact(store.root, min_files=2, grace_s=3600)
        # Connected before the merge: it reads the sources, not the merged files.
        assert observe(early) == before
    finally:
        early.close()
    assert observe_store(store) == before


def test_sources_stay_until_the_duckdb_file_stops_reading_them(
    one_file_per_table: Path, tmp_path: Path
) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    before = observe_store(store)
    assert store.refresh_views_file()
    compact(store.root, min_files=2, grace_s=0)
    # The .duckdb file's views were made before the merge: they still read the sources.
    assert compact(store.root, min_files=2, grace_s=0).files_deleted == 0
    assert appended_files(store)
    assert store.refresh_views_file()
    assert compact(store.root, min_files=2, grace_s=0).files_deleted > 0
    assert appended_files(store) == []
    con = duckdb.connect(str(store.db_path), read_only=True)
    try:
        assert observe(con) == before
    finally:
        con.close()


def test_a_merge_that_crashed_before_going_live_changes_nothing(
    one_file_per_table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    before = observe_store(store)
    real_replace = compaction.os.replace
    renames: list[str] = []

    def crash_on_third_merge(src: Any, dst: Any) -> None:
        if str(src).endswith(".parquet.partial"):
            renames.append(str(dst))
            if len(renames) == 3:
                raise OSError("killed")
        real_replace(src, dst)

    monkeypatch.setattr(compaction.os, "replace", crash_on_third_merge)
    with pytest.raises(OSError, match="killed"):
        compact(store.root, min_files=2, grace_s=3600)
    monkeypatch.undo()
    assert list((store.root / "compacted").rglob("*.partial"))  # left as a kill leaves it
    assert observe_store(store) == before  # two folders merged, the third not: no row twice

    compact(store.root, min_files=2, grace_s=0)
    compact(store.root, min_files=2, grace_s=0)
    assert not list((store.root / "compacted").rglob("*.partial"))
    assert appended_files(store) == []
    assert observe_store(store) == before


def test_one_compaction_at_a_time(one_file_per_table: Path, tmp_path: Path) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    with compaction.exclusive(store.root.resolve()) as mine:
        assert mine
        assert not compact(store.root, min_files=2).ran
    assert compact(store.root, min_files=2).files_merged > 0


def test_files_of_an_older_schema_merge_with_nulls(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh").ensure()
    schema = TABLES["runs"]
    old = pa.schema([f for f in schema if f.name != "note"])
    folder = store.parquet / "runs"
    for i in range(3):
        row = {"schema_version": 1, "run_id": f"r{i}", "epoch": "e", "event": "start"}
        pq.write_table(pa.Table.from_pylist([row], schema=old), folder / f"old-{i}.parquet")
    store.append("runs", [{"run_id": "r9", "epoch": "e", "event": "start", "note": "new"}])
    query = "SELECT run_id, note FROM raw_runs ORDER BY run_id"
    con = store.connect()
    before = con.execute(query).fetchall()
    con.close()
    assert compact(store.root, min_files=2, grace_s=0).files_merged == 4
    compact(store.root, min_files=2, grace_s=0)
    con = store.connect()
    assert (
        con.execute(query).fetchall()
        == before
        == [
            ("r0", None),
            ("r1", None),
            ("r2", None),
            ("r9", "new"),
        ]
    )
    con.close()


def test_a_reader_listing_as_sources_expire_skips_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader lists the compacted files, then an expiry deletes a merged-away compacted
    file before the reader reads the manifests: the manifest must still tell it the file is
    gone (it lists the merge that replaced it), or the reader asks for a deleted file."""
    store = Warehouse(tmp_path / "wh").ensure()
    for night in range(2):
        for index in range(3):
            row = {"run_id": f"r{night}-{index}", "epoch": "e", "event": "start"}
            store.append("runs", [row], parts=("p", "m"))
        compact(store.root, min_files=2, max_compacted=1, grace_s=3600)
    # the second night's merge took the first night's in
    (second,) = [
        m.merged
        for m in compaction.manifests(store.root)
        if any(source.parent == m.merged.parent for source in m.sources)
    ]
    assert len(compacted_files(store)) == 2
    grace_s = 1.0
    time.sleep(grace_s * 1.2)  # past the grace period since the second merge went live
    real_manifests = compaction.manifests

    def expire_first(root: Path) -> list[compaction.Manifest]:
        compact(store.root, min_files=2, grace_s=grace_s)
        return real_manifests(root)

    monkeypatch.setattr(compaction, "manifests", expire_first)
    con = store.connect()
    monkeypatch.undo()
    try:
        (n,) = con.execute("SELECT count(*) FROM raw_runs").fetchone() or (None,)
    finally:
        con.close()
    assert n == 6
    assert compacted_files(store) == [second]


def test_readers_and_a_writer_race_compactions(tmp_path: Path) -> None:
    """A writer appends, compactions merge and expire, readers count: every count a reader
    gets lies between what was written before it connected and after it finished."""
    store = Warehouse(tmp_path / "wh").ensure()
    written = 0
    stop = threading.Event()
    problems: list[str] = []
    counts: list[int] = []

    def write() -> None:
        nonlocal written
        index = 0
        while not stop.is_set():
            rows = [{"run_id": f"r{index}-{k}", "epoch": "e", "event": "start"} for k in range(3)]
            store.append("runs", rows, parts=("p", "m"))
            written += len(rows)
            index += 1

    grace_s = 2.0  # short, so that merged-away files expire all along

    def compact_loop() -> None:
        while not stop.is_set():
            compact(store.root, min_files=2, max_compacted=3, grace_s=grace_s)

    def read() -> None:
        while not stop.is_set():
            low = written
            connected = time.monotonic()
            try:
                con = store.connect()
                try:
                    (n, distinct), *_ = con.execute(
                        "SELECT count(*), count(DISTINCT run_id) FROM raw_runs"
                    ).fetchall()
                finally:
                    con.close()
            except Exception as exc:  # any failure is what this test looks for
                # A reader older than the grace period may lose files: that is the contract.
                if time.monotonic() - connected < grace_s:
                    problems.append(repr(exc))
                    return
                continue
            high = written
            if not low <= n <= high or n != distinct:
                problems.append(f"read {n} rows ({distinct} distinct), written {low}..{high}")
            counts.append(n)

    threads = [threading.Thread(target=f) for f in (write, compact_loop, read, read)]
    for thread in threads:
        thread.start()
    # at least 8 s of racing, and enough reads however loaded the machine (a connect builds
    # every view: slow when the cores are busy)
    started = time.monotonic()
    while time.monotonic() - started < 8 or (
        len(counts) <= 10 and time.monotonic() - started < 120
    ):
        time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join()
    assert not problems, problems[:5]
    assert len(counts) > 10 and max(counts) > 0
    assert list((store.root / "compacted").rglob("*.parquet"))  # merges happened meanwhile
    final = observe_runs(store)
    assert final == (written, written)


def observe_runs(store: Warehouse) -> tuple[int, int]:
    con = store.connect()
    try:
        (n, distinct), *_ = con.execute(
            "SELECT count(*), count(DISTINCT run_id) FROM raw_runs"
        ).fetchall()
        return n, distinct
    finally:
        con.close()


def test_compact_command(one_file_per_table: Path, tmp_path: Path) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    before = observe_store(store)
    runner = CliRunner()
    done = runner.invoke(app, ["compact", "-w", str(store.root), "--min-files", "2"])
    assert done.exit_code == 0, done.output
    assert "merged" in done.output and "deleted 0" in done.output
    again = runner.invoke(app, ["compact", "-w", str(store.root), "--grace", "0"])
    assert again.exit_code == 0 and "deleted 0" not in again.output, again.output
    assert observe_store(store) == before
    missing = runner.invoke(app, ["compact", "-w", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no warehouse at" in missing.output


# ----------------------------------------------------------------------------- tiered merges


def sized(folder: Path, name: str, size: int) -> Path:
    path = folder / name
    with path.open("wb") as handle:
        handle.truncate(size)  # sparse: only the size matters to the policy
    return path


def test_a_full_folder_merges_its_smallest_tier(tmp_path: Path) -> None:
    big = sized(tmp_path, "big", 100_000)
    nights = [sized(tmp_path, f"n{i}", 1_000 + i) for i in range(8)]
    fresh = [sized(tmp_path, f"f{i}", 100) for i in range(3)]
    (merge,) = tiered([big, *nights], fresh, 8)
    assert set(merge) == {*nights, *fresh}  # the big file is left alone
    # no tier with two files: the two smallest
    lone = [sized(tmp_path, f"x{i}", 10 ** (i + 2)) for i in range(4)]
    assert tiered(lone, [], 3) == [lone[:2]]
    # at most one file: everything, fresh files included
    assert [set(m) for m in tiered([big, *nights], fresh, 1)] == [{big, *nights, *fresh}]
    # the fresh files always become a compacted file, merged with others or alone
    merges = tiered([big, sized(tmp_path, "mid", 20_000)], fresh, 1)
    assert any(set(fresh) <= set(m) for m in merges)


def test_tiered_merges_rewrite_a_year_a_few_times(tmp_path: Path) -> None:
    """365 nightly compactions of one folder (a night's rows: 1 MB): the bytes the merges
    write stay a few times the data (every file merged again past 8 wrote ~23 times it), and
    the folder never holds more than 8 files."""
    night = 1_000_000
    files: list[Path] = []
    written = 0
    for n in range(365):
        fresh = [sized(tmp_path, f"fresh-{n}", night)]
        merges = tiered(files, fresh, 8) if len(files) + 1 > 8 else [fresh]
        for k, merge in enumerate(merges):
            size = sum(p.stat().st_size for p in merge)
            for p in merge:
                if p in files:
                    files.remove(p)
                p.unlink()
            files.append(sized(tmp_path, f"c-{n}-{k}", size))
            written += size
        assert len(files) <= 8
    assert sum(p.stat().st_size for p in files) == 365 * night
    assert written < 6 * 365 * night
