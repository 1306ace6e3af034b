"""``needlescope grade``: one answer graded by hand (needlescope.grading.by_hand), and judged
by a configured model the way the sweep's judge stage asks (needlescope.judge). A fast path:
Prefect is never imported. ``grade`` runs past 60 lines by its options alone: typer reads
them from the signature."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli_common import fail, text_or_file
from needlescope.providers.base import Reply


def grade(
    probe: Annotated[
        str,
        typer.Argument(
            help="The probe whose grader to use: recall, counting_stars, goto, cases, rag, "
            "niah, variable_tracking, aggregation, mrcr, latent_list."
        ),
    ],
    expected: Annotated[
        str,
        typer.Option(
            help='Expected answer, JSON or a file path: recall {"1": 1234, …} or [1234, …]; '
            "counting_stars [counts…]; goto the value; cases/rag the case as in the cells table; "
            'niah/variable_tracking/aggregation the expected strings ["…", …]; '
            'mrcr {"nonce": …, "reply": …}; latent_list the final list […].'
        ),
    ],
    answer: Annotated[str, typer.Option(help="The model's answer: text or a file path.")],
    facts: Annotated[
        str | None,
        typer.Option(help="The context's facts (JSON or file), as in the cells table's `facts`."),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(help="cases/rag: a model of --config that also judges the answer (1–10)."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="The sweep config that defines the --judge model.")
    ] = None,
    rubric: Annotated[
        Path | None, typer.Option(help="The judge's rubric (default: needlescope's own).")
    ] = None,
    judge_prompt: Annotated[
        str, typer.Option(help="The judge's prompt: judge-v1 (needlescope's) or uniah-judge.")
    ] = "judge-v1",
    finish_reason: Annotated[
        str | None,
        typer.Option(
            help="How the reply ended, as stored (stop, length, refusal, content_filter, …): "
            "sets `validity` (without it: unknown)."
        ),
    ] = None,
    reasoning_tokens: Annotated[
        int | None, typer.Option(help="Tokens the reply spent reasoning (for `validity`).")
    ] = None,
) -> None:
    """Grade one answer by hand and print the grade as one JSON object (accuracy 0–100)."""
    from needlescope.grading.by_hand import grade_one

    if judge is not None and (config is None or probe not in ("cases", "rag")):
        raise fail("--judge needs --config, and only cases and rag answers are judged")
    try:
        expected_text = text_or_file(expected)
        answer_text = text_or_file(answer)
        result = grade_one(
            probe,
            expected_text,
            answer_text,
            text_or_file(facts) if facts else None,
            finish_reason=finish_reason,
            reasoning_tokens=reasoning_tokens,
        )
        if judge is not None:
            verdict = asyncio.run(
                judge_answer(
                    str(config),
                    judge,
                    json.loads(expected_text),
                    answer_text,
                    str(rubric) if rubric else None,
                    judge_prompt,
                )
            )
            result.update(verdict)
            from needlescope.judge import disagreement

            result["disagreement"] = disagreement(result["accuracy"], verdict["judge_score"])
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    from needlescope.text import storable

    # A value read from the answer may hold a lone surrogate (a JSON "\\ud800"): printed as
    # U+FFFD, and flagged, since no terminal or pipe can take it as it is.
    text = json.dumps(result, ensure_ascii=False, default=str)
    if (printable := storable(text)) is not text:
        result["response_repaired"] = True
        printable = storable(json.dumps(result, ensure_ascii=False, default=str))
    sys.stdout.write(printable + "\n")


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
