"""The sweep's Prefect tasks, thin wrappers over the core: prompts built a batch at a time, one
query task run per cell, grading and storing a batch at a time; the contexts' builder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.tasks.contexts import ContextBuilder
    from needlescope.tasks.grade import grade_answers
    from needlescope.tasks.judging import judge_answer
    from needlescope.tasks.persist import persist
    from needlescope.tasks.prepare import build_prompts
    from needlescope.tasks.query import query_model

__all__ = [
    "ContextBuilder",
    "build_prompts",
    "grade_answers",
    "judge_answer",
    "persist",
    "query_model",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ContextBuilder": ".contexts",
        "build_prompts": ".prepare",
        "grade_answers": ".grade",
        "judge_answer": ".judging",
        "persist": ".persist",
        "query_model": ".query",
    },
)
