"""The upkeep around a run's end (flows/tidy.py): compaction and the views file start once
every model's batches are built, and the run's end redoes only what changed since."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from needlescope.config._sweep import SweepConfig
from needlescope.flows.run_end import after_end
from needlescope.flows.tidy import tidy_when_built
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.compaction import compact, views_snapshot_time
from tests.warehouse.test_compaction import (
    appended_files,
    compacted_files,
    observe,
    observe_store,
    split_copy,
)
from tests.warehouse.test_compaction import one_file_per_table as one_file_per_table  # fixture

LOGGER = logging.getLogger("test_tidy")


def config(compact: bool = True) -> SweepConfig:
    return SweepConfig.model_validate(
        {
            "name": "tidy",
            "compact": compact,
            "models": [{"name": "m", "provider": "openai", "model": "m", "base_url": "http://x"}],
            "probes": [
                {"probe": "recall", "lengths": [500], "length_unit": "chars", "needle_counts": [1]}
            ],
        }
    )


def through_views_file(store: Warehouse) -> dict[str, object]:
    con = duckdb.connect(str(store.db_path), read_only=True)
    try:
        return observe(con)
    finally:
        con.close()


def append_more(store: Warehouse, files: int = 8) -> None:
    """Copies of a few answers' files: more rows in the answers folder (another epoch's)."""
    sources = sorted(p for p in appended_files(store) if "answers" in p.parts)[:files]
    for n, path in enumerate(sources):
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            row.pop("schema_version")
            row["epoch"] = f"later-{n}"
        parts = [path.parent.parent.name, path.parent.name]
        store.append("answers", rows, parts=parts)


async def test_tidy_starts_once_every_model_is_built(
    one_file_per_table: Path, tmp_path: Path
) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    before = observe_store(store)
    first, second = asyncio.Event(), asyncio.Event()
    tidying = tidy_when_built(config(), store, [first, second])
    first.set()
    await asyncio.sleep(0.2)
    assert not tidying.done() and compacted_files(store) == []
    second.set()
    tidied = await asyncio.wait_for(tidying, 60)
    assert tidied.merged and tidied.views_refreshed and tidied.failure is None
    assert compacted_files(store)
    assert through_views_file(store) == before == observe_store(store)


def test_a_views_file_refreshed_before_a_merge_still_reads_every_row_once(
    one_file_per_table: Path, tmp_path: Path
) -> None:
    """What lets the views file be refreshed before the run's last merge: it keeps reading
    the merged files' sources until it is refreshed again."""
    store = split_copy(one_file_per_table, tmp_path / "wh")
    assert store.refresh_views_file()
    append_more(store)
    assert compact(store.root, min_files=2, grace_s=0).files_merged > 0
    assert through_views_file(store) == observe_store(store)


def test_the_end_refreshes_the_views_file_only_after_a_merge_of_its_own(
    one_file_per_table: Path, tmp_path: Path
) -> None:
    store = split_copy(one_file_per_table, tmp_path / "wh")
    built = asyncio.Event()
    built.set()
    tidied = asyncio.run(_tidied(store, built))
    refreshed_at = views_snapshot_time(store.root)
    assert tidied.views_refreshed and refreshed_at > 0
    # Nothing left to merge: the views file of the tail stands.
    after_end(config(), store, "e1", {}, False, LOGGER, tidied)
    assert views_snapshot_time(store.root) == refreshed_at
    # Files written after the tail's pass, enough to merge: merged, and the views refreshed.
    append_more(store)
    after_end(config(), store, "e1", {}, False, LOGGER, tidied)
    assert views_snapshot_time(store.root) > refreshed_at
    assert through_views_file(store) == observe_store(store)
    # No tail pass (a run with no cells to ask): the end does all of it.
    refreshed_at = views_snapshot_time(store.root)
    after_end(config(compact=False), store, "e1", {}, False, LOGGER, None)
    assert views_snapshot_time(store.root) > refreshed_at


async def _tidied(store: Warehouse, built: asyncio.Event):  # type: ignore[no-untyped-def]
    return await tidy_when_built(config(), store, [built])
