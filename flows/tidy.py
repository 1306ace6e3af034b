"""The warehouse's upkeep around a run's end: compaction (with the rollups) and the views file.

Most of it starts before the run ends: once every batch's prompts are built, only the last
requests are in flight, and a thread merges what the run has written so far and refreshes the
views file meanwhile (DuckDB and Arrow work outside the GIL). When the last answers are
written, the run's end compacts again: that pass covers only the last batches' files, and the
views file is refreshed once more only if it merged any. Compaction and readers are safe at
any moment (each merge keeps its sources for readers that listed them), so when this starts
changes only how much of it is left for the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from needlescope.config import SweepConfig
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.compaction import CompactionReport
from needlescope.warehouse.store.replies import PendingReplies
from needlescope.warehouse.store.rollups_update import RollupReport


@dataclass
class Tidied:
    """What one pass of upkeep did: its compaction (or why it did not run) and whether the
    views file was refreshed (False: locked elsewhere; None: not tried)."""

    compaction: CompactionReport | None = None
    rollups: list[RollupReport] = field(default_factory=list)
    replies_pruned: int = 0  # kept replies no run came back for (warehouse/store/replies.py)
    failure: str | None = None
    views_refreshed: bool | None = None

    @property
    def merged(self) -> bool:
        return self.compaction is not None and self.compaction.files_merged > 0


def compacted(store: Warehouse) -> Tidied:
    """Merge the warehouse's small files (this run's and others') and bring the rollups up to
    date. Never raises: the answers are stored, the files only stay small."""
    from needlescope.warehouse.store.rollups_update import compact

    try:
        done, rolled = compact(store.root)
    except Exception as exc:
        return Tidied(failure=str(exc))
    return Tidied(compaction=done, rollups=rolled)


def tidy(config: SweepConfig, store: Warehouse) -> Tidied:
    """Compaction (if the config asks for it), then the views file refreshed over its result."""
    done = compacted(store) if config.compact else Tidied()
    done.replies_pruned = PendingReplies(store.root).prune()
    done.views_refreshed = store.refresh_views_file()
    return done


def tidy_when_built(
    config: SweepConfig, store: Warehouse, built: Iterable[asyncio.Event]
) -> asyncio.Future[Tidied]:
    """:func:`tidy` in a thread once every ``built`` event is set (every model's batches
    built); the future to wait for at the run's end."""

    async def after_building() -> Tidied:
        for event in built:
            await event.wait()
        # Its own thread: the loop's default pool serves the run's own file work. A run that
        # fails meanwhile does not wait for it.
        pool = ThreadPoolExecutor(1, thread_name_prefix="needlescope-tidy")
        running: Future[Tidied] = pool.submit(tidy, config, store)
        pool.shutdown(wait=False)
        return await asyncio.wrap_future(running)

    return asyncio.ensure_future(after_building())


def log_tidied(done: Tidied, logger: Any) -> None:
    if done.failure is not None:
        logger.warning("warehouse compaction skipped: %s", done.failure)
    if done.replies_pruned:
        logger.info("%d kept replies older than a week removed", done.replies_pruned)
    for step in done.rollups:
        if step.fresh_files or step.rebuilt:
            logger.info(
                "rollups: %d attempts, %d needle, %d answer and %d hallucination tally rows"
                " added%s (%.1f s)",
                step.attempts,
                step.tally_rows,
                step.answer_rows,
                step.invented_rows,
                " (rebuilt from the raw tables)" if step.rebuilt else "",
                step.seconds,
            )
    report = done.compaction
    if report is not None and (report.files_merged or report.files_deleted):
        logger.info(
            "warehouse compacted: %d files merged, %d merged earlier deleted (%.1f s)",
            report.files_merged,
            report.files_deleted,
            report.seconds,
        )
