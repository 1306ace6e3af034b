"""Reading and scoring a latent-list answer.

Reading, by query: ``list`` takes the first ``[...]`` that ``ast.literal_eval`` reads as a list
(not a subscript such as ``x[2]``); ``length`` and ``element`` the first integer outside
subscripts and calls. Score: 100 when what was read equals the final value exactly (ints only),
else 0; nothing to read is a parse failure (no score). *Consistent with*: the largest k such
that the state after the first k operations gives what was read.

Design: docs/design/probes.md#latent-list
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from needlescope.probes.base import Grade
from needlescope.probes.latent_list.program import QUERIES

GRADER = "latent-list-v1"
MAX_SPANS = 64
_MAX_DIGITS = 18
_SUBSCRIPT_OR_CALL = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\[\]]*\]|\([^()]*\))")
_INTEGER = re.compile(r"(?<![\w.])-?\d+(?!\w|\.\d)")

Answered = list[Any] | int


def _spans(text: str) -> list[tuple[int, int]]:
    """Matched ``[`` … ``]`` pairs that are not subscripts, by where they start."""
    open_at: list[int] = []
    spans: list[tuple[int, int]] = []
    for at, char in enumerate(text):
        if char == "[":
            open_at.append(at)
        elif char == "]" and open_at:
            start = open_at.pop()
            before = text[start - 1] if start else " "
            if not (before.isalnum() or before in "_)]"):
                spans.append((start, at + 1))
    return sorted(spans)


def read_list(answer: str) -> list[Any] | None:
    for start, end in _spans(answer)[:MAX_SPANS]:
        try:
            value = ast.literal_eval(answer[start:end])
        except Exception:  # hostile text makes literal_eval raise many kinds of error
            continue
        if isinstance(value, list):
            return value
    return None


def read_number(answer: str) -> int | None:
    text = answer
    while True:  # innermost first: len(x[0]) goes in two rounds
        stripped = _SUBSCRIPT_OR_CALL.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    for match in _INTEGER.finditer(text):
        digits = match.group().lstrip("-")
        if len(digits) <= _MAX_DIGITS:
            return int(match.group())
    return None


def read(answer: str, query: str) -> Answered | None:
    return read_list(answer) if query == "list" else read_number(answer)


def same(a: Any, b: Any) -> bool:
    """Equal, with ints only ever equal to ints (bools and floats are not)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is int and type(b) is int and a == b


def value_of(state: Sequence[int], query: str, index: int | None) -> Answered | None:
    """What the query asks of a state; None when the state has no element ``index``."""
    if query == "list":
        return list(state)
    if query == "length":
        return len(state)
    if index is None or not -len(state) <= index < len(state):
        return None
    return state[index]


def consistent_prefix(
    states: Sequence[Sequence[int]], answered: Any, query: str, index: int | None = None
) -> int | None:
    """The most operations whose resulting state gives ``answered`` (see the module's rule)."""
    for k in range(len(states) - 1, -1, -1):
        value = value_of(states[k], query, index)
        if value is not None and same(value, answered):
            return k
    return None


@dataclass(frozen=True)
class LatentScore:
    answered: Answered | None  # None: nothing to read
    accuracy: float | None  # 100 or 0; None when nothing could be read
    consistent_with: int | None


def score(
    answer: str,
    query: str,
    expected: Answered,
    states: Sequence[Sequence[int]] = (),
    index: int | None = None,
) -> LatentScore:
    answered = read(answer, query)
    if answered is None:
        return LatentScore(None, None, None)
    accuracy = 100.0 if same(answered, expected) else 0.0
    consistent = consistent_prefix(states, answered, query, index) if states else None
    return LatentScore(answered, accuracy, consistent)


@dataclass(frozen=True)
class _Expected:
    query: str
    answer: Answered
    states: tuple[tuple[int, ...], ...]
    index: int | None


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def _expected(expected: Any) -> _Expected | None:
    """A final list alone (``[…]``, as ``needlescope grade`` takes it) or a program's expected."""
    if _ints(expected):
        return _Expected("list", expected, (), None)
    if not isinstance(expected, Mapping) or expected.get("query") not in QUERIES:
        return None
    query, index = expected["query"], expected.get("index")
    answer: Any = expected.get("answer")
    states = expected.get("states") or []
    if not isinstance(states, list) or not all(_ints(s) for s in states):
        return None
    fits = _ints(answer) if query == "list" else type(answer) is int
    if not fits or (index is not None and type(index) is not int):
        return None
    return _Expected(query, answer, tuple(tuple(s) for s in states), index)


def _jsonable(value: Any) -> Any:
    """What was read, as stored: a literal JSON cannot hold (a set, bytes) as its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
    return value


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """The probe's grade (never raises; an unreadable ``expected`` is a parse error)."""
    read_expected = _expected(expected)
    if read_expected is None:
        return Grade(
            parse_ok=False, parse_error="expected is not a latent-list answer", accuracy=None
        )
    query = read_expected.query
    result = score(
        response if isinstance(response, str) else "",
        query,
        read_expected.answer,
        read_expected.states,
        read_expected.index,
    )
    if result.answered is None:
        what = "list" if query == "list" else "number"
        return Grade(parse_ok=False, parse_error=f"no {what} in the reply", accuracy=None)
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=result.accuracy,
        answered=_jsonable(result.answered),
        figures={"consistent_with": result.consistent_with},
        detail={
            "grader": GRADER,
            "query": query,
            "operations": len(read_expected.states) - 1 if read_expected.states else None,
        },
    )
