"""Text every store can hold: a model's reply may carry what UTF-8 cannot encode."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """``text`` with every lone surrogate (a JSON ``"\\ud800"``, an undecodable byte Python
    kept as ``\\udcXX``) replaced by U+FFFD; a surrogate pair becomes the character it encodes.
    Everything else, NUL and noncharacters included, is kept: UTF-8 holds it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_values(row: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A row with each string value made storable, and whether any had to change."""
    repaired = False
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, str) and not value.isascii():
            fixed = storable(value)
            repaired = repaired or fixed is not value
            value = fixed
        out[key] = value
    return out, repaired
