"""The judge stage: a judge model's verdict on an answer, asked through the sweep's Asker (each
try's reply kept until the answer is stored, so a run killed meanwhile does not pay for it
again) with needlescope.grading._judge's one request builder and one verdict reader."""

from __future__ import annotations

from typing import Any

from needlescope.config import ProbeConfig
from needlescope.grading import judge, load_rubric
from needlescope.probes.cases.entry import CasesProbe
from needlescope.providers.base import ChatRequest, Reply
from needlescope.tasks.query import Answer, Asker, Unsent


async def judge_answer(asker: Asker, answer: Answer, probe: ProbeConfig) -> dict[str, Any] | None:
    """The ``judge_*`` keys of the answer's detail, for probes configured with a judge."""
    if not isinstance(probe, CasesProbe) or probe.judge is None:
        return None
    if not isinstance(answer.outcome, Reply):
        return None
    judge_name, cell = probe.judge, answer.context.cell

    async def ask(request: ChatRequest, attempt: int) -> Reply | str:
        purpose = f"judge:{judge_name}" + (f":try{attempt}" if attempt > 1 else "")
        label = f"judge {judge_name} · {cell.label}"
        reply = await asker.ask(judge_name, cell, request, label, purpose)
        if isinstance(reply, Unsent):
            return "the budget was spent"
        return reply if isinstance(reply, Reply) else str(reply)

    return await judge(
        ask,
        probe.judge_prompt,
        answer.context.expected,
        answer.outcome.text,
        model=judge_name,
        rubric=load_rubric(probe.rubric_file),  # the probe's, else the one needlescope ships
        max_tokens=asker.config.model(judge_name).generation.answer_tokens,
    )
