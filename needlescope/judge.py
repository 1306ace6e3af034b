"""The LLM judge of the cases probes: a 1–10 rubric score of an answer against the true answer.

Pure functions: the sweep sends ``judge_messages(…)`` to the judge model, reads its reply with
``parse_verdict`` and merges ``judge_record(…)`` (flat ``judge_*`` keys) into the answer's
``detail``, where the views of warehouse/views_cases.sql read it.

Disagreement rule: the judge calls an answer correct when its score is at least ``JUDGE_PASS``
(7: "most of the facts, nothing wrong" in the rubric); keyword recall calls it correct when its
accuracy is at least ``KEYWORD_PASS`` (50: on average half of each needle's keywords). The two
disagree when exactly one of them calls the answer correct; with either grade missing there is
nothing to disagree about.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlescope.errors import ConfigError
from needlescope.providers.base import Message

JUDGE_VERSION = "judge-v1"
JUDGE_MAX_TOKENS = 160  # room for {"score": n, "reason": "…"} and some chatter around it
SCORE_MIN, SCORE_MAX = 1, 10
JUDGE_PASS = 7
KEYWORD_PASS = 50.0
RAW_CHARS = 2000  # the judge's reply is kept, cut to this length, for auditing

DEFAULT_RUBRIC = """\
Score the answer from 1 to 10 by how much of the reference answer it gets right.
Judge facts only: wording, order, length and style do not matter, and an answer may
add harmless detail. Every fact the reference names counts about equally.

- 10: every fact of the reference answer is stated, and nothing stated contradicts it.
- 7: most of the facts are stated correctly; one is missing or only vaguely stated,
  and nothing stated is wrong.
- 5: about half of the facts are stated correctly; the rest are missing, vague, or
  mixed with a wrong claim.
- 3: at most one fact is stated correctly, and the answer is mostly missing, vague,
  or wrong.
- 1: no fact of the reference answer is stated: the answer is wrong, invented, a
  refusal, says the text does not contain it, or is empty.

Use the scores in between (2, 4, 6, 8, 9) for answers that fall between these levels.
"""

_SYSTEM = """\
You grade answers to questions about a long document. You are given the question, the \
reference answer and the answer to grade. Compare the answer with the reference answer only; \
do not use any other knowledge.

{rubric}

Reply with one JSON object and nothing else: {{"score": <a whole number from 1 to 10>, \
"reason": "<one short sentence>"}}"""

_USER = """\
<question>
{question}
</question>

<reference_answer>
{true_answer}
</reference_answer>

<answer>
{response}
</answer>

Grade the answer against the reference answer. Reply with the JSON object only: \
{{"score": <a whole number from 1 to 10>, "reason": "<one short sentence>"}}"""


@dataclass(frozen=True)
class Verdict:
    score: int | None
    reason: str | None
    error: str | None  # why no score could be read; None when ``score`` is set


def load_rubric(path: str | Path | None) -> str:
    """The rubric text of ``path``, or the built-in one (configs/judge_rubric.md's text)."""
    if path is None:
        return DEFAULT_RUBRIC
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ConfigError(f"rubric file {path}: {reason.lower()}") from None
    if not text.strip():
        raise ConfigError(f"rubric file {path} is empty")
    return text


def judge_messages(
    question: str, true_answer: str, response: str, rubric: str = DEFAULT_RUBRIC
) -> tuple[Message, ...]:
    """The judge's prompt: the rubric and reply format, then the three texts to compare."""
    answer = response.strip() or "(the answer is empty)"
    return (
        Message("system", _SYSTEM.format(rubric=rubric.strip())),
        Message("user", _USER.format(question=question, true_answer=true_answer, response=answer)),
    )


# --- reading the verdict ----------------------------------------------------------------------

_NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))"
_JSON_OBJECT = re.compile(r"\{[^{}]{0,2000}\}")
_BRACKETS = re.compile(rf"\[\[\s*{_NUMBER}\s*\]\]")
_LABELLED = re.compile(
    rf"\b(?:score|rating)\b[\"']?\s*(?:is|of|=|:)?\s*[*_]*\s*{_NUMBER}(?:\s*/\s*10\b)?",
    re.IGNORECASE,
)
_REASON_KEYS = ("reason", "explanation", "justification", "rationale")


def parse_verdict(text: str) -> Verdict:
    """The score of a judge's reply: JSON ``{"score": 7}``, then ``[[7]]``, then ``Score: 7``.

    Never raises: a reply without a score, or with one outside 1–10 or not whole, is an error.
    """
    if not isinstance(text, str):
        return Verdict(None, None, "the judge's reply is not text")
    found = _from_json(text)
    if found is None:
        for pattern in (_BRACKETS, _LABELLED):
            match = pattern.search(text)
            if match:
                rest = text[: match.start()] + " " + text[match.end() :]
                found = (match.group(1), _tidy(rest))
                break
    if found is None:
        return Verdict(None, _tidy(text), "no score found in the judge's reply")
    raw, reason = found
    score, error = _score(raw)
    return Verdict(score, reason, error)


def _from_json(text: str) -> tuple[Any, str | None] | None:
    for match in _JSON_OBJECT.finditer(text):
        try:
            data = json.loads(match.group(0))
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        keys = {str(k).lower(): v for k, v in data.items()}
        if "score" not in keys:
            continue
        reason = next((keys[k] for k in _REASON_KEYS if isinstance(keys.get(k), str)), None)
        return keys["score"], _tidy(reason) if reason else None
    return None


def _score(raw: Any) -> tuple[int | None, str | None]:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None, f"score {_show(raw)} is not a number"
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        return None, f"score {_show(raw)} is not a number"
    if math.isnan(value):
        return None, f"score {_show(raw)} is not a number"
    if not SCORE_MIN <= value <= SCORE_MAX:
        return None, f"score {_show(raw)} is outside {SCORE_MIN}–{SCORE_MAX}"
    if value != int(value):
        return None, f"score {_show(raw)} is not a whole number"
    return int(value), None


def _show(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 20 else text[:19] + "…"


def _tidy(text: str, limit: int = 300) -> str | None:
    text = " ".join(text.split()).strip(" ,.;:-*_{}[]\"'")
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- combining with keyword recall ------------------------------------------------------------


def judge_passed(score: int | None) -> bool | None:
    return None if score is None else score >= JUDGE_PASS


def keyword_passed(accuracy: float | None) -> bool | None:
    return None if accuracy is None else accuracy >= KEYWORD_PASS


def disagreement(keyword_accuracy: float | None, judge_score: int | None) -> bool:
    """True when exactly one of the two grades calls the answer correct (see the module doc)."""
    judged, keyed = judge_passed(judge_score), keyword_passed(keyword_accuracy)
    return judged is not None and keyed is not None and judged != keyed


def judge_record(
    verdict: Verdict, *, model: str, keyword_accuracy: float | None, raw: str | None = None
) -> dict[str, Any]:
    """The keys the sweep merges into an answer's ``detail`` (JSON-able)."""
    return {
        "judge_model": model,
        "judge_version": JUDGE_VERSION,
        "judge_score": verdict.score,
        "judge_reason": verdict.reason,
        "judge_error": verdict.error,
        "judge_raw": None if raw is None else raw[:RAW_CHARS],
        "disagreement": disagreement(keyword_accuracy, verdict.score),
    }


def failed_record(model: str, error_kind: str, message: str) -> dict[str, Any]:
    """``detail`` keys when the judge model could not be asked (after its retries)."""
    return {
        "judge_model": model,
        "judge_version": JUDGE_VERSION,
        "judge_score": None,
        "judge_reason": None,
        "judge_error": f"{error_kind}: {' '.join(message.split())[:300]}",
        "judge_raw": None,
        "disagreement": False,
    }
