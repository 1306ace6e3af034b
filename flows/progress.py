"""Progress of a sweep: the CLI plugs in a rich bar (``showing``); without one, the flow logs
milestones. Either way the flow run's progress artifact in the Prefect UI shows it too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Protocol

from needlescope.tasks.runtime import scoped


class ProgressSink(Protocol):
    def start(self, total: int, skipped: int) -> None: ...

    def advance(self, graded: int, failed: int, tokens: int = 0) -> None: ...

    def batches(self, model: str, note: str) -> None:
        """A batch model's open batches, by status ("" once none is open)."""
        ...

    def finish(self) -> None: ...


class LogProgress:
    def __init__(self, logger: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> None:
        self.logger = logger
        self.total = self.done = self.failed = self.tokens = 0
        self._next_report = 0.0

    def start(self, total: int, skipped: int) -> None:
        self.total = total
        self.logger.info("%d cells to query (%d already graded in this epoch)", total, skipped)

    def advance(self, graded: int, failed: int, tokens: int = 0) -> None:
        self.done += graded + failed
        self.failed += failed
        self.tokens += tokens
        if self.total and self.done / self.total >= self._next_report:
            self.logger.info(
                "%d/%d cells done, %d failed, %d tokens used",
                self.done,
                self.total,
                self.failed,
                self.tokens,
            )
            self._next_report = self.done / self.total + 0.1

    def batches(self, model: str, note: str) -> None:
        pass  # each poll is logged by the batch sweep itself

    def finish(self) -> None:
        pass


# Set by the CLI around a run it shows; unset, the flow logs milestones.
_SHOWN: ContextVar[ProgressSink | None] = ContextVar("needlescope_progress", default=None)


def shown_progress() -> ProgressSink | None:
    return _SHOWN.get()


def showing(sink: ProgressSink) -> AbstractContextManager[ProgressSink | None]:
    """``sink`` shows the progress of the sweeps run inside the block."""
    return scoped(_SHOWN, sink)


class ArtifactProgress:
    """Another sink's progress, also shown in the Prefect UI as the flow run's progress
    artifact: the share of cells done, and how many were graded and failed. The artifact is
    updated by :meth:`updating` every ``every_s`` seconds while counts change (each update is
    an API call, not one per cell), and once more at the end."""

    def __init__(self, inner: ProgressSink, epoch: str, every_s: float = 5.0) -> None:
        self.inner = inner
        self.epoch = epoch
        self.every_s = every_s
        self.total = self.skipped = self.graded = self.failed = 0
        self.artifact_id: Any = None
        self._shown: tuple[int, int] | None = None

    def start(self, total: int, skipped: int) -> None:
        self.total, self.skipped = total, skipped
        self.inner.start(total, skipped)

    def advance(self, graded: int, failed: int, tokens: int = 0) -> None:
        self.graded += graded
        self.failed += failed
        self.inner.advance(graded, failed, tokens)

    def batches(self, model: str, note: str) -> None:
        self.inner.batches(model, note)

    def finish(self) -> None:
        self.inner.finish()

    def description(self) -> str:
        done = self.graded + self.failed
        return (
            f"**{done:,}** of {self.total:,} cells done: {self.graded:,} graded, "
            f"{self.failed:,} failed (epoch `{self.epoch}`; {self.skipped:,} graded earlier)"
        )

    def share(self) -> float:
        done = self.graded + self.failed
        return 100.0 if not self.total else min(100.0, 100.0 * done / self.total)

    async def show(self) -> None:
        """Create or update the artifact, if the counts changed since it was last shown."""
        from prefect.artifacts import acreate_progress_artifact, aupdate_progress_artifact

        counts = (self.graded, self.failed)
        if counts == self._shown:
            return
        if self.artifact_id is None:
            self.artifact_id = await acreate_progress_artifact(
                self.share(), description=self.description()
            )
        else:
            await aupdate_progress_artifact(
                self.artifact_id, self.share(), description=self.description()
            )
        self._shown = counts

    @contextlib.asynccontextmanager
    async def updating(self, logger: Any) -> AsyncIterator[ArtifactProgress]:
        """The artifact kept up to date while the block runs; a failed update is logged and
        the sweep goes on (the artifact only shows what the warehouse holds)."""

        async def loop() -> None:
            while True:
                await self._show_quietly(logger)
                await asyncio.sleep(self.every_s)

        task = asyncio.ensure_future(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self._show_quietly(logger)

    async def _show_quietly(self, logger: Any) -> None:
        try:
            await self.show()
        except Exception as exc:
            logger.warning("progress artifact not updated: %s", exc)
