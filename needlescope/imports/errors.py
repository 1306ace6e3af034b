"""The one error an import raises: a result file it cannot read, named with what is wrong."""

from __future__ import annotations

import re
from pathlib import Path

from needlescope.errors import NeedlescopeError

_BREAKS = re.compile(r"[\r\n\x00-\x1f]")


class ImportFormatError(NeedlescopeError):
    """``PATH: what is wrong`` (``PATH: line N: …`` in a JSONL file), on one line.

    A reader raises it for the first unreadable file or record and returns nothing, so an
    import is all or nothing.
    """

    def __init__(self, path: str | Path, problem: str, *, line: int | None = None) -> None:
        where = f"{path}: line {line}" if line is not None else str(path)
        # A path or a quoted value may hold a newline: the message must stay one line.
        message = _BREAKS.sub(lambda m: repr(m.group())[1:-1], f"{where}: {problem}")
        super().__init__(message)
        self.path = str(path)
        self.line = line
        self.problem = problem
