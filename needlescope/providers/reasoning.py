"""Models that think before they answer: which they are, and how much output room they need.

A reasoning model spends its output limit on reasoning first; sent the answer's budget alone,
it can come back empty, cut off mid-thought. So a model that thinks gets the answer budget
plus a reasoning budget, computed here once for the providers and for ``plan``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

DEFAULT_REASONING_BUDGET = 16_384
# OpenAI's reasoning models: sent max_completion_tokens, never temperature or top_p.
OPENAI_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_OTHER_REASONERS = ("deepseek-reasoner",)
_GEMINI_VERSION = re.compile(r"^gemini-(\d+)(?:\.(\d+))?")


def bare_name(model: str | None) -> str:
    """``openai/o3-mini`` (a router's vendor prefix) or ``models/gemini-2.5-pro`` → the id."""
    return (model or "").rsplit("/", 1)[-1].lower()


def uses_openai_reasoning_params(model: str | None) -> bool:
    """The default of ``openai_reasoning_params`` for an OpenAI-compatible model id."""
    return bare_name(model).startswith(OPENAI_REASONING_PREFIXES)


def thinks_by_default(provider: str, model: str | None) -> bool:
    """The default of ``reasoning``: o1/o3/o4/gpt-5, deepseek-reasoner, Gemini 2.5 and later
    (which think without a thinkingConfig). Claude thinks only when asked to."""
    name = bare_name(model)
    if provider == "gemini":
        match = _GEMINI_VERSION.match(name)
        return match is not None and (int(match[1]), int(match[2] or 0)) >= (2, 5)
    if provider in ("openai", "local"):
        return name.startswith(OPENAI_REASONING_PREFIXES + _OTHER_REASONERS)
    return False


def camel(key: str) -> str:
    """``thinking_budget`` → ``thinkingBudget`` (Gemini takes either spelling)."""
    head, *rest = key.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def gemini_thinking(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``thinkingConfig`` of Gemini generation settings (camelCase keys), or None."""
    for key, value in extra.items():
        if camel(key) == "generationConfig" and isinstance(value, Mapping):
            nested = gemini_thinking(value)
            if nested is not None:
                return nested
        if camel(key) == "thinkingConfig" and isinstance(value, Mapping):
            return {camel(k): v for k, v in value.items()}
    return None


def anthropic_thinking(extra: Mapping[str, Any]) -> dict[str, Any]:
    thinking = extra.get("thinking")
    return dict(thinking) if isinstance(thinking, Mapping) else {}


def reasoning_allowance(
    provider: str, extra: Mapping[str, Any], *, reasoning: bool, reasoning_budget: int
) -> int:
    """Tokens added to the answer budget for reasoning, as each API counts it.

    Anthropic: ``thinking.budget_tokens`` (adaptive thinking: ``reasoning_budget``). Gemini:
    ``thinkingConfig.thinkingBudget`` (-1, dynamic: ``reasoning_budget``); a thinking model
    without one, ``reasoning_budget``. OpenAI-compatible: ``reasoning_budget`` for a model that
    thinks.
    """
    if provider == "anthropic":
        thinking = anthropic_thinking(extra)
        budget = thinking.get("budget_tokens")
        if thinking.get("type") == "enabled" and _is_int(budget):
            return max(0, budget)
        return reasoning_budget if thinking.get("type") == "adaptive" else 0
    if provider == "gemini":
        config = gemini_thinking(extra)
        budget = (config or {}).get("thinkingBudget")
        if _is_int(budget):
            return reasoning_budget if budget < 0 else budget
        if config and config.get("thinkingLevel"):
            return reasoning_budget
    return reasoning_budget if reasoning else 0


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
