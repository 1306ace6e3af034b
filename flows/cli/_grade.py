"""``needlescope grade``: one answer graded by hand (needlescope.grading.by_hand), and judged
by a configured model the way the sweep's judge stage asks (needlescope.grading._judge). A
fast path: Prefect is never imported. ``grade`` runs past 60 lines by its options alone: typer reads
them from the signature. A text option is always its text: a file is read only when a
``--*-file`` option names it (``-``: standard input)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from needlescope.errors import NeedlescopeError
from needlescope.flows.cli._common import fail
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
        str | None,
        typer.Option(
            metavar="<text>",
            help="The expected answer, as JSON text (never read as a path; a file: "
            '--expected-file): recall {"1": 1234, …} or [1234, …]; '
            "counting_stars [counts…]; goto the value; cases/rag the case as in the cells table; "
            'niah/variable_tracking/aggregation the expected strings ["…", …]; '
            'mrcr {"nonce": …, "reply": …}; latent_list the final list […].',
        ),
    ] = None,
    expected_file: Annotated[
        Path | None,
        typer.Option(
            help="A file (a path; - reads standard input) holding the expected answer, "
            "instead of --expected.",
        ),
    ] = None,
    answer: Annotated[
        str | None,
        typer.Option(
            metavar="<text>",
            help="The model's answer, as text (never read as a path; a file: --answer-file).",
        ),
    ] = None,
    answer_file: Annotated[
        Path | None,
        typer.Option(
            help="A file (a path; - reads standard input) holding the model's answer, "
            "instead of --answer.",
        ),
    ] = None,
    facts: Annotated[
        str | None,
        typer.Option(
            metavar="<text>",
            help="The context's facts, as JSON text as in the cells table's `facts` (never "
            "read as a path; a file: --facts-file).",
        ),
    ] = None,
    facts_file: Annotated[
        Path | None,
        typer.Option(
            help="A file (a path; - reads standard input) holding the context's facts, "
            "instead of --facts.",
        ),
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

    if judge is not None:
        from needlescope.probes.catalog import specs

        judged = [name for name, spec in specs().items() if spec.judged]
        if config is None or probe not in judged:
            raise fail(
                f"--judge needs --config, and only {' and '.join(judged)} answers are judged"
            )
    expected_text, answer_text, facts_text = read_inputs(
        expected, expected_file, answer, answer_file, facts, facts_file
    )
    try:
        result = grade_one(
            probe,
            expected_text,
            answer_text,
            facts_text or None,
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
            from needlescope.grading import disagreement

            result["disagreement"] = disagreement(result["accuracy"], verdict["judge_score"])
    except NeedlescopeError as exc:
        raise fail(str(exc)) from None
    from needlescope.haystack import storable

    # A value read from the answer may hold a lone surrogate (a JSON "\\ud800"): printed as
    # U+FFFD, and flagged, since no terminal or pipe can take it as it is.
    text = json.dumps(result, ensure_ascii=False, default=str)
    if (printable := storable(text)) is not text:
        result["response_repaired"] = True
        printable = storable(json.dumps(result, ensure_ascii=False, default=str))
    sys.stdout.write(printable + "\n")


def read_inputs(
    expected: str | None,
    expected_file: Path | None,
    answer: str | None,
    answer_file: Path | None,
    facts: str | None,
    facts_file: Path | None,
) -> tuple[str, str, str | None]:
    """The expected answer, the answer and the facts: each one's text as given (never read as a
    path), or the file its ``--NAME-file`` names (``-``: standard input). Every misuse is
    refused before anything is read: both forms of one, neither form of a required one, two
    ``-`` (standard input is read once)."""
    inputs = {
        "expected": (expected, expected_file, True),
        "answer": (answer, answer_file, True),
        "facts": (facts, facts_file, False),
    }
    for name, (text, path, required) in inputs.items():
        if text is not None and path is not None:
            raise fail(f"give --{name} or --{name}-file, not both")
        if required and text is None and path is None:
            raise fail(f"--{name} TEXT or --{name}-file PATH is required")
    stdin = [f"--{name}-file" for name, (_, path, _) in inputs.items() if str(path) == "-"]
    if len(stdin) > 1:
        raise fail(f"{', '.join(stdin)}: only one may be - (standard input is read only once)")
    read = {
        name: text if path is None else read_input(f"--{name}-file", path)
        for name, (text, path, _) in inputs.items()
    }
    expected_text, answer_text = read["expected"], read["answer"]
    assert expected_text is not None and answer_text is not None  # required: checked above
    return expected_text, answer_text, read["facts"]


def read_input(option: str, path: Path) -> str:
    """The file at ``path`` (``-``: standard input) as text, as UTF-8 with undecodable bytes
    kept as lone surrogates (the grade then stores them as U+FFFD and says so) and newlines
    read universally; a file that cannot be read is a one-line error naming ``option``."""
    try:
        if str(path) != "-":
            return path.read_text(encoding="utf-8", errors="surrogateescape")
        if sys.stdin is None:
            raise OSError("it is closed")
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is None:
            return sys.stdin.read()
        text = buffer.read().decode("utf-8", errors="surrogateescape")
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text reads a file
    except (OSError, ValueError) as exc:  # ValueError: a path no file can have (a NUL)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = "standard input" if str(path) == "-" else str(path)
        raise fail(f"{option}: cannot read {where}: {reason}") from None


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
    from needlescope.config import load_config
    from needlescope.grading import JUDGE_PROMPTS, load_rubric
    from needlescope.grading import judge as run_judge
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
