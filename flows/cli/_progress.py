"""A rich progress bar for `needlescope run`: cells done, failed, tokens used, and the batch
models' open batches."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class RichProgress:
    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("[bold]cells"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failed]} failed"),
            TextColumn("{task.fields[tokens]:,} tokens"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[batches]}"),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("cells", total=0, failed=0, tokens=0, batches="")
        self.failed = self.tokens = 0
        self.open_batches: dict[str, str] = {}  # model -> its open batches, by status

    def start(self, total: int, skipped: int) -> None:
        if skipped:
            self.progress.console.print(f"{skipped} cells already graded in this epoch: skipped")
        self.progress.update(self.task, total=total)
        self.progress.start()

    def advance(self, graded: int, failed: int, tokens: int = 0) -> None:
        self.failed += failed
        self.tokens += tokens
        self.progress.update(
            self.task, advance=graded + failed, failed=self.failed, tokens=self.tokens
        )

    def batches(self, model: str, note: str) -> None:
        if note:
            self.open_batches[model] = note
        else:
            self.open_batches.pop(model, None)
        shown = "; ".join(f"{m}: {n}" for m, n in sorted(self.open_batches.items()))
        self.progress.update(self.task, batches=shown)

    def finish(self) -> None:
        self.progress.stop()
