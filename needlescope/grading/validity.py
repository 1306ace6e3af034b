"""Whether an answer measures recall: one value per answer, from how its reply ended.

A reply that was cut off, spent its budget thinking, was refused or filtered is an answer
(its cell is done) but not a measurement: accuracy figures leave it out and count it apart,
so a model that was cut off is never read as a model that forgot.
"""

from __future__ import annotations

from needlescope.providers import base
from needlescope.providers.base import Reply

VALID = "valid"
TRUNCATED = "truncated"  # the output limit cut the visible answer (or the turn was paused)
THINKING_EXHAUSTED = "thinking_exhausted"  # nothing visible: the budget ended in reasoning
REFUSED = "refused"
CONTENT_FILTERED = "content_filtered"
CONTEXT_EXCEEDED = "context_exceeded"
EMPTY = "empty"  # nothing visible, and no reasoning to blame
UNKNOWN = "unknown"  # no finish reason to judge by (imported rows): counted as valid

VALUES = (
    VALID,
    TRUNCATED,
    THINKING_EXHAUSTED,
    REFUSED,
    CONTENT_FILTERED,
    CONTEXT_EXCEEDED,
    EMPTY,
    UNKNOWN,
)
COUNTED = frozenset({VALID, UNKNOWN})
INVALID = tuple(v for v in VALUES if v not in COUNTED)

_BY_FINISH = {
    base.REFUSAL: REFUSED,
    base.CONTENT_FILTER: CONTENT_FILTERED,
    base.CONTEXT_EXCEEDED: CONTEXT_EXCEEDED,
}
_CUT = frozenset({base.LENGTH, base.PAUSE_TURN})
# Reasons after which a visible answer is whole: the model stopped of its own accord.
_WHOLE = frozenset({base.STOP, base.TOOL_CALLS})


def validity_of(reply: Reply) -> str:
    """The validity of ``reply`` (see the module's values), never guessed past what it says."""
    finish = reply.finish_reason
    if finish is None:
        return UNKNOWN
    if finish in _BY_FINISH:
        return _BY_FINISH[finish]
    visible = bool(reply.text.strip())
    if not visible and reply.thought:
        return THINKING_EXHAUSTED
    if finish in _CUT:
        return TRUNCATED
    if not visible:
        return EMPTY
    return VALID if finish in _WHOLE else UNKNOWN


def parse_values(text: str) -> list[str]:
    """``"empty,truncated"`` as a list of known values; a one-line error names an unknown one."""
    values = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in values if v not in VALUES]
    if unknown:
        raise ValueError(f"unknown validity {unknown[0]!r}; known: {', '.join(VALUES)}")
    return values
