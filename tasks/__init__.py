"""The sweep's Prefect tasks, thin wrappers over the core: prompts built, models asked, answers
graded and stored, a batch of cells per task run; the contexts' builder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.tasks.contexts import ContextBuilder
    from needlescope.tasks.grade import grade_answers
    from needlescope.tasks.judging import judge_answer
    from needlescope.tasks.persist import persist
    from needlescope.tasks.prepare import build_prompts
    from needlescope.tasks.query import ask_batch

__all__ = [
    "ContextBuilder",
    "ask_batch",
    "build_prompts",
    "grade_answers",
    "judge_answer",
    "persist",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ContextBuilder": ".contexts",
        "ask_batch": ".query",
        "build_prompts": ".prepare",
        "grade_answers": ".grade",
        "judge_answer": ".judging",
        "persist": ".persist",
    },
)
