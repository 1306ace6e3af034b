"""The LLM judge of the cases probes: a 1–10 score of an answer against the true answer.
One module of nearly 400 lines on purpose: the one request builder, the one verdict reader and
the one exchange of both judge prompts stay side by side, each a single definition.

Two judge prompts (``judge_prompt:``): ``judge-v1`` (the default, needlescope's rubric, a JSON
verdict read by ``parse_verdict``) and ``uniah-judge`` (U-NIAH's, read as LangChain reads it).
``judge_request`` builds the request, ``read_verdict`` reads the reply, ``judge`` runs the
exchange and returns the flat ``judge_*`` keys of the answer's ``detail``. The judge and keyword
recall disagree when exactly one calls the answer correct (``JUDGE_PASS``, ``KEYWORD_PASS``).

Design: docs/design/grading.md#judge
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlescope.errors import ConfigError
from needlescope.providers.base import ChatRequest, Message, Reply

JUDGE_VERSION = "judge-v1"
UNIAH_JUDGE = "uniah-judge"
JUDGE_PROMPTS = (JUDGE_VERSION, UNIAH_JUDGE)
JUDGE_MAX_TOKENS = 256  # judge-v1: room for {"score": n, "reason": "…"} and chatter around it
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


# --- U-NIAH's judge ---------------------------------------------------------------------------

# LangChain's scoring prompt with a reference (langchain/evaluation/scoring/prompt.py,
# SCORING_TEMPLATE_WITH_REFERENCE), as langchain 0.3 formats it.
UNIAH_SYSTEM = "You are a helpful assistant."
_UNIAH_USER = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response "
    "provided by an AI assistant to the user question displayed below. {criteria}"
    "[Ground truth]\n{reference}\nBegin your evaluation by providing a short explanation. Be "
    "as objective as possible. After providing your explanation, you must rate the response on a "
    'scale of 1 to 10 by strictly following this format: "[[rating]]", for example: '
    '"Rating: [[5]]".\n\n[Question]\n{input}\n\n[The Start of Assistant\'s Answer]\n'
    "{prediction}\n[The End of Assistant's Answer]"
)
# U-NIAH's criterion as its source holds it: a triple-quoted string, each line indented 16
# spaces, a space after the last line ("numberical" is U-NIAH's spelling).
_UNIAH_CRITERION_LINES = (
    "Score 1: The answer is completely unrelated to the reference.",
    "Score 3: The answer has minor relevance but does not align with the reference.",
    "Score 5: The answer has moderate relevance but contains inaccuracies.",
    "Score 7: The answer partially aligns with the reference but has minor omissions.",
    "Score 10: The answer is aligned with the reference. No need to consider the information "
    "order and no need to be exact the same as the reference.",
    "Only respond with a numberical score!",
)
UNIAH_CRITERIA = {
    "accuracy": "".join(f"\n{' ' * 16}{line}" for line in _UNIAH_CRITERION_LINES) + " "
}
UNIAH_TEMPERATURE = 0.1
UNIAH_TRIES = 3


def uniah_criteria_text(criteria: dict[str, str] = UNIAH_CRITERIA) -> str:
    """The ``{criteria}`` of the prompt, as LangChain's labeled evaluator writes it."""
    text = "\n".join(f"{name}: {value}" for name, value in criteria.items()).strip()
    return f"For this evaluation, you should primarily consider the following criteria:\n{text}\n"


def uniah_judge_messages(question: str, true_answer: str, response: str) -> tuple[Message, ...]:
    """U-NIAH's judge prompt: the answer goes in as it is, empty or not."""
    values = {
        "criteria": uniah_criteria_text(),
        "reference": true_answer,
        "input": question,
        "prediction": response,
    }
    # One pass over the template, so braces in the texts are never read as fields.
    user = re.sub(r"\{(criteria|reference|input|prediction)\}", lambda m: values[m[1]], _UNIAH_USER)
    return (Message("system", UNIAH_SYSTEM), Message("user", user))


_DOUBLE_BRACKETS = re.compile(r"\[\[(.*?)\]\]")
_UNIAH_SCORES = frozenset(str(n) for n in range(SCORE_MIN, SCORE_MAX + 1))


def parse_uniah_verdict(text: str) -> Verdict:
    """LangChain's reading: the first ``[[…]]`` (on one line) must be exactly 1, 2, … or 10.

    "[[7]]" reads 7; "[[ 7 ]]", "[[7.0]]", "[[07]]" and "[[7/10]]" do not read, and neither
    does a reply whose first brackets hold anything else ("[[rating]]"), whatever follows.
    """
    if not isinstance(text, str):
        return Verdict(None, None, "the judge's reply is not text")
    match = _DOUBLE_BRACKETS.search(text)
    if match is None:
        return Verdict(None, _tidy(text), "no [[rating]] in the judge's reply")
    if match[1] not in _UNIAH_SCORES:
        return Verdict(None, _tidy(text), f"[[{_show(match[1])}]] is not a rating from 1 to 10")
    return Verdict(int(match[1]), _tidy(text[: match.start()] + " " + text[match.end() :]), None)


# --- one request, one reading, one exchange ---------------------------------------------------


def judge_request(
    prompt: str,
    question: str,
    true_answer: str,
    response: str,
    *,
    rubric: str = DEFAULT_RUBRIC,
    max_tokens: int | None = None,
) -> ChatRequest:
    """The request a judge model is sent. ``uniah-judge`` sends ``max_tokens`` only when given
    (U-NIAH sends none); ``judge-v1`` always sends its own, whatever is given."""
    if prompt == UNIAH_JUDGE:
        messages = uniah_judge_messages(question, true_answer, response)
        return ChatRequest(messages, max_tokens=max_tokens, temperature=UNIAH_TEMPERATURE)
    if prompt != JUDGE_VERSION:
        raise ConfigError(f"unknown judge prompt {prompt!r}; known: {', '.join(JUDGE_PROMPTS)}")
    messages = judge_messages(question, true_answer, response, rubric)
    return ChatRequest(messages, max_tokens=JUDGE_MAX_TOKENS, temperature=0.0)


def read_verdict(prompt: str, text: str) -> Verdict:
    return parse_uniah_verdict(text) if prompt == UNIAH_JUDGE else parse_verdict(text)


def tries(prompt: str) -> int:
    """How often the judge is asked when its verdict cannot be read (U-NIAH: three times)."""
    return UNIAH_TRIES if prompt == UNIAH_JUDGE else 1


# What asking the judge gave: its reply, or why there is none (a failure after its retries).
Ask = Callable[[ChatRequest, int], Awaitable[Reply | str]]


async def judge(
    ask: Ask,
    prompt: str,
    expected: Any,
    response: str,
    *,
    model: str,
    rubric: str = DEFAULT_RUBRIC,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """Judge one answer: ask (``ask(request, attempt)``, attempts from 1) until a verdict can be
    read or the prompt's tries are spent, and return the ``judge_*`` keys of ``detail``."""
    request = judge_request(
        prompt,
        str(expected["question"]),
        str(expected["true_answer"]),
        response,
        rubric=rubric,
        max_tokens=max_tokens,
    )
    verdict: Verdict | None = None
    raw: str | None = None
    attempt = 0
    prompt_tokens: int | None = None
    while attempt < tries(prompt):
        attempt += 1
        reply = await ask(request, attempt)
        if not isinstance(reply, Reply):
            return failed_record(model, "not judged", reply, prompt=prompt, tries=attempt)
        if reply.prompt_tokens is not None:
            prompt_tokens = (prompt_tokens or 0) + reply.prompt_tokens
        raw = reply.text
        verdict = read_verdict(prompt, raw)
        if verdict.score is not None:
            break
    assert verdict is not None  # asked at least once
    record = judge_record(verdict, model=model, raw=raw, prompt=prompt, tries=attempt)
    record["judge_prompt_tokens"] = prompt_tokens  # all tries together, as the provider counted
    if verdict.score is None and prompt == UNIAH_JUDGE:
        record["judge_unreadable"] = True  # U-NIAH's -1: no verdict, not a score
        record["judge_error"] = f"{verdict.error} ({attempt} tries)"
    return record


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
    verdict: Verdict,
    *,
    model: str,
    keyword_accuracy: float | None = None,
    raw: str | None = None,
    prompt: str = JUDGE_VERSION,
    tries: int = 1,
) -> dict[str, Any]:
    """The keys the sweep merges into an answer's ``detail`` (JSON-able); ``disagreement``
    only when the keyword accuracy is given (the grade stage adds it otherwise)."""
    record: dict[str, Any] = {
        "judge_model": model,
        "judge_version": prompt,
        "judge_score": verdict.score,
        "judge_reason": verdict.reason,
        "judge_error": verdict.error,
        "judge_raw": None if raw is None else raw[:RAW_CHARS],
        "judge_tries": tries,
    }
    if keyword_accuracy is not None:
        record["disagreement"] = disagreement(keyword_accuracy, verdict.score)
    return record


def failed_record(
    model: str, error_kind: str, message: str, *, prompt: str = JUDGE_VERSION, tries: int = 1
) -> dict[str, Any]:
    """``detail`` keys when the judge model could not be asked (after its retries)."""
    return {
        "judge_model": model,
        "judge_version": prompt,
        "judge_score": None,
        "judge_reason": None,
        "judge_error": f"{error_kind}: {' '.join(message.split())[:300]}",
        "judge_raw": None,
        "judge_tries": tries,
        "disagreement": False,
    }
