"""MRCR's score, OpenAI's rule exactly, and which occurrence an answer reproduced.

OpenAI's ``grade`` (the openai/mrcr dataset card): 0 unless the response starts with the nonce
(no stripping of spaces first); otherwise the nonce is removed from the front of the response
and of the answer (the dataset's answer is nonce + reply) and the score is
``difflib.SequenceMatcher(None, response, answer).ratio()``. Ours is that ratio × 100.

Beside it: whether the nonce was there, the same ratio of the answer against every repeated
reply (the nonce removed when present, so an answer without it still shows which reply it
copied), and the occurrence it resembles most when that is not the one asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from needlescope.probes.base import Grade

GRADER = "mrcr-openai-v1"


def openai_grade(response: str, answer: str, random_string_to_prepend: str) -> float:
    """OpenAI MRCR's ``grade``, 0 to 1, with its arguments as the dataset names them."""
    if not response.startswith(random_string_to_prepend):
        return 0.0
    response = response.removeprefix(random_string_to_prepend)
    answer = answer.removeprefix(random_string_to_prepend)
    return float(SequenceMatcher(None, response, answer).ratio())


@dataclass(frozen=True)
class MrcrScore:
    accuracy: float  # OpenAI's ratio × 100; 0 when the answer does not start with the nonce
    nonce_hit: bool
    ratios: tuple[float, ...]  # the answer against each repeated reply, 0 to 1
    closest: int  # the occurrence (1-based) the answer is most like
    wrong_occurrence: int | None  # ``closest``, when it is more like the answer than the asked one


def score(response: str, nonce: str, replies: Sequence[str], ask: int) -> MrcrScore:
    """Score ``response`` against reply ``ask`` (1-based) of ``replies``."""
    if not 1 <= ask <= len(replies):
        raise ValueError(f"ask must lie in 1..{len(replies)}, got {ask}")
    hit = response.startswith(nonce)
    accuracy = 100 * openai_grade(response, nonce + replies[ask - 1], nonce)
    body = response.removeprefix(nonce)
    ratios = tuple(float(SequenceMatcher(None, body, reply).ratio()) for reply in replies)
    # Ties go to the asked occurrence, then to the earliest.
    closest = max(range(1, len(ratios) + 1), key=lambda i: (ratios[i - 1], i == ask, -i))
    return MrcrScore(
        accuracy=accuracy,
        nonce_hit=hit,
        ratios=ratios,
        closest=closest,
        wrong_occurrence=None if closest == ask else closest,
    )


def _expected(expected: Any) -> tuple[str, tuple[str, ...], int] | None:
    """(nonce, replies, ask) from ``{"nonce", "reply"}`` or a conversation's full expected."""
    if not isinstance(expected, Mapping):
        return None
    nonce, reply = expected.get("nonce"), expected.get("reply")
    replies, ask = expected.get("replies"), expected.get("ask")
    if not isinstance(nonce, str) or not isinstance(reply, str):
        return None
    if replies is None:
        return nonce, (reply,), 1
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        return None
    if type(ask) is not int or not 1 <= ask <= len(replies) or replies[ask - 1] != reply:
        return None
    return nonce, tuple(replies), ask


def grade(expected: Any, facts: Mapping[str, Any], response: str) -> Grade:
    """The probe's grade (never raises; an unreadable ``expected`` is a parse error)."""
    read = _expected(expected)
    if read is None:
        return Grade(
            parse_ok=False,
            parse_error="expected needs a nonce and a reply (and replies holding it at ask)",
            accuracy=None,
        )
    nonce, replies, ask = read
    result = score(response if isinstance(response, str) else "", nonce, replies, ask)
    return Grade(
        parse_ok=True,
        parse_error=None,
        accuracy=result.accuracy,
        answered=result.closest,
        figures={"nonce_hit": result.nonce_hit, "wrong_occurrence": result.wrong_occurrence},
        detail={
            "grader": GRADER,
            "ask": ask,
            "closest": result.closest,
            "ratios": [round(r, 6) for r in result.ratios],
        },
    )
