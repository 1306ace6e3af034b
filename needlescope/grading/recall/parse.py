"""Reading a recall reply as the recall seed read it: extraction, then ordering.

1. *Extraction* (what the seed stored): a ``json`` fence, else a plain one, else the first
   brace-balanced object that is valid JSON with a key made only of digits; a fence whose
   content is not JSON, or nothing found, is a parse failure (an empty reply is neither).
2. *Ordering* (how the seed's analysis read the answer): with every key an ``int()``, the
   values in integer key order (a key such as ``"01"`` makes the answer ``uncounted``);
   otherwise all keys sorted as strings.

An answer the seed stored went through step 1 already: :func:`read_stored` applies step 2.
Design: docs/design/grading.md#recall-parse
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, NamedTuple, TypeAlias

import orjson

from needlescope.grading.recall.values import FLAT_TYPES, INT_TYPES, Value, canonical_value

ReplySource: TypeAlias = Literal["json-fence", "fence", "bare"]

EMPTY_REPLY = "empty reply: neither an answer nor a parse failure (the seed did not count it)"
NO_OBJECT = "no JSON object with a digit key"
_JSON_FENCE = "```json"
_ANY_FENCE = re.compile(r"(?=```)")  # every position a fence starts, overlapping ones too
_OBJECT_AHEAD = re.compile(r"\s*\{")
_FENCE_CLOSE = re.compile(r"\}\s*```")
# An object whose braces nest at most one level; it ends at the first "}" closing it.
_BALANCED = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}")
_NOTHING = object()


@dataclass(frozen=True, slots=True)
class Extraction:
    """Step 1: the extracted object, or why there is none (``empty``: not counted at all)."""

    obj: dict[str, Any] | None
    source: ReplySource | None = None
    error: str | None = None
    empty: bool = False

    @property
    def ok(self) -> bool:
        return self.obj is not None


def _loads(text: str) -> object:
    """What ``json.loads`` gives, or _NOTHING where it raises."""
    try:
        value = orjson.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        # orjson reads a flat object of ints and strings exactly as json.loads does; others
        # (integers beyond 64 bits, NaN, lone surrogates) are left to json.
        if type(value) is dict and set(map(type, value.values())) <= FLAT_TYPES:
            return value
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOTHING


def _fenced(text: str, openings: Iterable[int]) -> str | None:
    """The content of the first fence, opening at one of ``openings``, that holds ``{…}``."""
    for start in openings:
        ahead = _OBJECT_AHEAD.match(text, start)
        if ahead is None:
            continue
        brace = ahead.end() - 1
        close = _FENCE_CLOSE.search(text, brace + 1)
        # No close after this brace means none after any later one either.
        return None if close is None else text[brace : close.start() + 1]
    return None


def _json_fence_openings(text: str) -> Iterable[int]:
    at = text.find(_JSON_FENCE)
    while at >= 0:
        yield at + len(_JSON_FENCE)
        at = text.find(_JSON_FENCE, at + 1)


def _fence_openings(text: str) -> Iterable[int]:
    return (m.start() + 3 for m in _ANY_FENCE.finditer(text))


def extract_answer(text: object) -> Extraction:
    """Step 1 of the module's docstring. Never raises."""
    if not isinstance(text, str):
        return Extraction(None, error="response is not a string")
    if not text.strip():
        return Extraction(None, empty=True)
    for source, openings in (
        ("json-fence", _json_fence_openings(text)),
        ("fence", _fence_openings(text)),
    ):
        content = _fenced(text, openings)
        if content is not None:
            value = _loads(content)
            if value is _NOTHING:
                return Extraction(None, error=f"the {source} content is not valid JSON")
            return Extraction(value, source)  # type: ignore[arg-type]
    for candidate in _BALANCED.finditer(text):
        value = _loads(candidate.group())
        if type(value) is dict and any(key.isdigit() for key in value):
            return Extraction(value, "bare")
    return Extraction(None, error=NO_OBJECT)


class Reading(NamedTuple):
    """A reply as the seed read it (both steps).

    ``values``: the answered values in the seed's order, canonical (None unless counted).
    ``keyed``: the keys are exactly "1".."len(values)", so key figures go by position;
    otherwise ``obj`` holds the extracted object for them. ``ints``: every value is a plain
    int. ``error``: why the reply is a parse failure. ``uncounted``: why a reply that is no
    parse failure is left out of the counts (an empty reply, or keys the seed could not order).
    """

    values: list[Value] | None
    keyed: bool
    obj: dict[str, Any] | None
    ints: bool
    error: str | None
    uncounted: str | None
    source: ReplySource | None

    @property
    def parse_ok(self) -> bool | None:
        """True: an answer was extracted; False: a parse failure; None: an empty reply."""
        if self.error is not None:
            return False
        return None if self.obj is None and self.values is None else True


_EMPTY = Reading(None, False, None, False, None, EMPTY_REPLY, None)
_KEYS: list[str] = []
_GETTERS: dict[int, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
_MAX_CACHED_GETTER = 1024


def _key_list(n: int) -> list[str]:
    """["1", ..., str(n)]."""
    if n > len(_KEYS):
        _KEYS.extend(str(i) for i in range(len(_KEYS) + 1, max(n, 2 * len(_KEYS), 64) + 1))
    return _KEYS[:n]


def _in_key_order(obj: dict[str, Any]) -> list[Any] | None:
    """The values of an object whose keys are exactly "1".."n", in that order; else None."""
    n = len(obj)
    if n < 2:
        if n == 0:
            return []
        value = obj.get("1", _NOTHING)
        return None if value is _NOTHING else [value]
    getter = _GETTERS.get(n)
    if getter is None:
        getter = itemgetter(*_key_list(n))
        if n <= _MAX_CACHED_GETTER:
            _GETTERS[n] = getter
    try:
        return list(getter(obj))  # n distinct keys all found among n: exactly "1".."n"
    except KeyError:
        return None


def order_answer(obj: dict[str, Any]) -> tuple[list[Any] | None, str | None]:
    """Step 2 of the module's docstring: (raw values in the seed's order, None), or (None,
    why the seed's analysis could not order the answer)."""
    try:
        numbered = sorted((int(key), key) for key in obj)
    except ValueError:  # a key int() refuses: every key sorted as a string
        return [obj[key] for key in sorted(obj)], None
    values = []
    for number, key in numbered:
        value = obj.get(str(number), _NOTHING)
        if value is _NOTHING:
            return None, (
                f"key {json.dumps(key, ensure_ascii=False)[:40]} reads as {number}, but the answer"
                f" has no key {json.dumps(str(number))[:40]}: the seed's analysis left it out"
            )
        values.append(value)
    return values, None


def _canonical(values: list[Any]) -> tuple[list[Value], bool]:
    types = set(map(type, values))
    if types <= INT_TYPES:
        return values, True
    canonical = [v if type(v) is int or type(v) is str else canonical_value(v) for v in values]
    return canonical, set(map(type, canonical)) <= INT_TYPES


def read_reply(text: object) -> Reading:
    """Both steps of the module's docstring. Never raises."""
    extraction = extract_answer(text)
    obj = extraction.obj
    if obj is None:
        if extraction.empty:
            return _EMPTY
        return Reading(None, False, None, False, extraction.error, None, None)
    return _ordered(obj, extraction.source)


def read_stored(text: object) -> Reading:
    """An answer the seed stored (``model_response_json``): it passed the seed's extraction
    already, which kept only the JSON object it found. So it is answered by definition and
    read by step 2 alone: ``{}`` is an answer with no values, and an object without digit keys
    (``{"1-7170": -1}``) is ordered by its keys as strings. A text that is not a JSON object,
    which the seed never stored, is read as a fresh reply (both steps). Never raises."""
    value = _loads(text) if isinstance(text, str) else _NOTHING
    if type(value) is not dict:
        return read_reply(text)
    return _ordered(value, None)


def _ordered(obj: dict[str, Any], source: ReplySource | None) -> Reading:
    raw = _in_key_order(obj)
    keyed = raw is not None
    if raw is None:
        raw, unordered = order_answer(obj)
        if raw is None:
            return Reading(None, False, obj, False, None, unordered, source)
    values, ints = _canonical(raw)
    return Reading(values, keyed, None if keyed else obj, ints, None, None, source)
