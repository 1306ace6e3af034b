"""Progress of a sweep: the CLI plugs in a rich bar (``showing``); without one, the flow logs
milestones."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Protocol

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
