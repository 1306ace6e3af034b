"""Grading of model replies: pure functions, no I/O. recall/ (the recall probe's metric),
keywords.py (keyword recall of the needle cases), the judge's request and reading, validity
(whether an answer measures recall), effective length, by_hand.py (``needlescope grade``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.grading._effective_length import (
        NOLIMA_RATIO,
        RULER_THRESHOLD,
        SEED_THRESHOLD,
        both_rules,
        default_threshold,
        longest_sustained,
        ruler_family,
    )
    from needlescope.grading._judge import JUDGE_PROMPTS, disagreement, judge, load_rubric
    from needlescope.grading.validity import UNKNOWN, parse_values, validity_of

__all__ = [
    "JUDGE_PROMPTS",
    "NOLIMA_RATIO",
    "RULER_THRESHOLD",
    "SEED_THRESHOLD",
    "UNKNOWN",
    "both_rules",
    "default_threshold",
    "disagreement",
    "judge",
    "load_rubric",
    "longest_sustained",
    "parse_values",
    "ruler_family",
    "validity_of",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "NOLIMA_RATIO": "._effective_length",
        "ruler_family": "._effective_length",
        "RULER_THRESHOLD": "._effective_length",
        "SEED_THRESHOLD": "._effective_length",
        "both_rules": "._effective_length",
        "default_threshold": "._effective_length",
        "longest_sustained": "._effective_length",
        "JUDGE_PROMPTS": "._judge",
        "disagreement": "._judge",
        "judge": "._judge",
        "load_rubric": "._judge",
        "UNKNOWN": ".validity",
        "parse_values": ".validity",
        "validity_of": ".validity",
    },
)
