"""One answer graded by hand (``needlescope grade PROBE``), as one JSON-ready dict. No I/O:
the command line reads the texts and prints the grade."""

from __future__ import annotations

import json
from typing import Any

from needlescope.errors import NeedlescopeError
from needlescope.grading._effective_length import ruler_family
from needlescope.grading.validity import validity_of
from needlescope.haystack import storable
from needlescope.probes.catalog import specs
from needlescope.probes.registry import probe_module
from needlescope.providers.base import Reply


def _json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NeedlescopeError(f"{option} is not JSON: {exc.msg} at position {exc.pos}") from None


def expected_values(text: str) -> list[int]:
    """Expected recall needles as `{"1": v1, …}` (the seed's format) or a JSON list `[v1, …]`."""
    data = _json(text, "--expected")
    if isinstance(data, dict):
        try:
            items = sorted(((int(k), v) for k, v in data.items()), key=lambda kv: kv[0])
        except ValueError:
            raise NeedlescopeError("--expected: every key must be a number") from None
        values = [v for _, v in items]
    elif isinstance(data, list):
        values = data
    else:
        raise NeedlescopeError("--expected must be a JSON object or list of numbers")
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise NeedlescopeError(
            "--expected must hold at least one integer needle, and only integers"
        )
    return values


def expected_strings(text: str) -> list[str]:
    """RULER's probes: the expected strings, a JSON list (numbers are read as their text)."""
    data = _json(text, "--expected")
    if not isinstance(data, list) or not data:
        raise NeedlescopeError('--expected must be a JSON list of expected strings: ["…", …]')
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in data):
        raise NeedlescopeError("--expected must hold only strings (or whole numbers)")
    return [str(v) for v in data]


def _readable(value: str) -> Any:
    """Table rows keep answered values as JSON text; show them as values again."""
    try:
        return json.loads(value)
    except (TypeError, json.JSONDecodeError):
        return value


def grade_one(
    probe: str,
    expected: str,
    answer: str,
    facts: str | None = None,
    *,
    finish_reason: str | None = None,
    reasoning_tokens: int | None = None,
) -> dict[str, Any]:
    """The grade of one answer; ``validity`` from how the reply ended (``finish_reason`` as
    needlescope stores it: stop, length, refusal, …; none given: unknown)."""
    if probe not in specs():
        raise NeedlescopeError(f"unknown probe {probe!r}; known: {', '.join(specs())}")
    if probe == "recall":
        target: Any = expected_values(expected)
    elif ruler_family(probe):
        target = expected_strings(expected)
    else:
        target = _json(expected, "--expected")
    context_facts = _json(facts, "--facts") if facts else {}
    if not isinstance(context_facts, dict):
        raise NeedlescopeError("--facts must be a JSON object")
    # As the sweep stores it: what UTF-8 cannot hold is U+FFFD, and the grade says so.
    stored = storable(answer)
    grade = probe_module(probe).grade(target, context_facts, stored)
    reply = Reply(stored, finish_reason, None, None, reasoning_tokens, 0.0)
    result: dict[str, Any] = {
        "probe": probe,
        "validity": validity_of(reply),
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": grade.answered,
        "response_repaired": stored is not answer,
    }
    if grade.detail:
        result["detail"] = dict(grade.detail)
    if grade.parse_ok:
        result["needles"] = [vars(n) for n in grade.needles]
        for table, rows in grade.tables.items():
            result[table] = [
                {k: _readable(v) if k in ("value", "needle_indices") else v for k, v in row.items()}
                for row in rows
            ]
    return result
