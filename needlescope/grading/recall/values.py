"""Answered values and how they compare.

The seed compared the values of the expected and answered JSON objects with Python's ``==``:
the string ``"1234"`` is not the number ``1234``, while ``1234.0`` is. A value is kept in a
hashable canonical form that compares the same way against every needle (an int of two or
more digits): ints stay ints, integral floats become ints, strings stay strings, anything
else becomes its compact JSON text.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Hashable, Sequence
from typing import TypeAlias

Value: TypeAlias = int | str
"""A canonical answered value: an int for JSON integers, else a string."""

INT_TYPES = frozenset({int})
FLAT_TYPES = frozenset({int, str})
# rapidfuzz compares list elements by a 64-bit code: a plain int in [0, 2**61 - 1) is its
# own code (and its own hash), so such values can be compared without relabelling.
CODE_LIMIT = sys.hash_info.modulus


def canonical_value(value: object) -> Value:
    """A decoded JSON value in its hashable canonical form (see the module's docstring)."""
    if isinstance(value, bool):  # bool is an int subclass, but JSON true is not a needle
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return json_text(value)
    if isinstance(value, str):
        return value
    return json_text(value)


def json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def to_ids(*sequences: Sequence[Hashable]) -> list[list[int]]:
    """Relabel values as small ints so every comparison is plain ``==`` on values.

    rapidfuzz hashes list elements, and would treat a 1-character string as its code
    point (``"Ӓ"`` == 1234); relabelling first rules that out.
    """
    ids: dict[Hashable, int] = {}
    return [[ids.setdefault(v, len(ids)) for v in seq] for seq in sequences]


def in_code_range(values: Sequence[int]) -> bool:
    """Plain ints (checked by the caller) that rapidfuzz compares exactly as ``==`` does."""
    return not values or (min(values) >= 0 and max(values) < CODE_LIMIT)


def plain_ints(values: Sequence[Hashable]) -> bool:
    return set(map(type, values)) <= INT_TYPES and in_code_range(values)  # type: ignore[arg-type]
