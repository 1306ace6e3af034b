"""`needlescope grade PROBE`: one answer graded by hand, as one JSON-ready dict."""

from __future__ import annotations

import json
from typing import Any

from needlescope.errors import NeedlescopeError
from needlescope.probes.registry import MODULES, probe_module
from needlescope.providers.base import Reply
from needlescope.text import storable
from needlescope.validity import validity_of


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
    if probe not in MODULES:
        raise NeedlescopeError(f"unknown probe {probe!r}; known: {', '.join(MODULES)}")
    target = expected_values(expected) if probe == "recall" else _json(expected, "--expected")
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


JUDGE_CONTEXT = 4096  # a local judge's slot: rubric, question, true answer and the answer


async def judge_answer(
    config_path: str,
    judge: str,
    expected: dict[str, Any],
    answer: str,
    rubric_file: str | None,
    judge_prompt: str = "judge-v1",
) -> dict[str, Any]:
    """Ask a configured model to judge one cases answer, as the sweep's judge stage does (the
    same request, the same reading, the same tries)."""
    import contextlib

    from needlescope.config_file import load_config
    from needlescope.judge import JUDGE_PROMPTS, load_rubric
    from needlescope.judge import judge as run_judge
    from needlescope.providers.base import ChatRequest
    from needlescope.providers.open import open_provider

    if judge_prompt not in JUDGE_PROMPTS:
        known = ", ".join(JUDGE_PROMPTS)
        raise NeedlescopeError(f"--judge-prompt: unknown {judge_prompt!r}; known: {known}")
    config = load_config(config_path)
    try:
        model = config.model(judge)
    except KeyError:
        raise NeedlescopeError(f"--judge: no model {judge!r} in {config_path}") from None
    if not isinstance(expected, dict) or not {"question", "true_answer"} <= set(expected):
        raise NeedlescopeError("--expected must hold the case's question and true_answer")
    async with contextlib.AsyncExitStack() as stack:
        provider = await open_provider(stack, model, ctx_per_slot=JUDGE_CONTEXT)

        async def ask(request: ChatRequest, attempt: int) -> Reply | str:
            return await provider.complete(request)

        return await run_judge(
            ask,
            judge_prompt,
            expected,
            answer,
            model=judge,
            rubric=load_rubric(rubric_file),
            max_tokens=model.generation.answer_tokens,
        )
