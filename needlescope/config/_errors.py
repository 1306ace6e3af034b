"""How a pydantic validation error becomes one line: shared by the sweep config and the gates,
which ``config`` will hold (so it cannot import ``config``)."""

from __future__ import annotations

import re
from typing import Any

# A message that starts with a field's dotted name ("x.y: ...") names where it is itself.
FIELD_FIRST = re.compile(r"([a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_]+)*): ")


def format_location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if not str(part).startswith("function-"))


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
