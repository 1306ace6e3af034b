"""Model providers: one async ``complete`` each (openai, anthropic, gemini, local llama.cpp),
registered by name; the rules of what each accepts (reasoning, temperature, output limits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from needlescope._exports import lazy_exports

if TYPE_CHECKING:
    from needlescope.providers.reasoning import (
        DEFAULT_REASONING_BUDGET,
        reasoning_allowance,
        thinks_by_default,
        uses_openai_reasoning_params,
    )
    from needlescope.providers.rules import DEFAULT_TEMPERATURE, check_generation

__all__ = [
    "DEFAULT_REASONING_BUDGET",
    "DEFAULT_TEMPERATURE",
    "check_generation",
    "reasoning_allowance",
    "thinks_by_default",
    "uses_openai_reasoning_params",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DEFAULT_REASONING_BUDGET": ".reasoning",
        "reasoning_allowance": ".reasoning",
        "thinks_by_default": ".reasoning",
        "uses_openai_reasoning_params": ".reasoning",
        "DEFAULT_TEMPERATURE": ".rules",
        "check_generation": ".rules",
    },
)
