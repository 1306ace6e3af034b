"""Each provider's documented ranges for generation settings, checked when a config loads.

A setting the API would refuse with HTTP 400 on every request fails here instead, in one line
naming the field, before anything is sent (``run`` and ``plan`` alike).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from needlescope.errors import RuleError
from needlescope.providers.reasoning import anthropic_thinking, bare_name, camel, gemini_thinking


class Generation(Protocol):
    """What the rules read of a model's generation settings (needlescope.config's Generation)."""

    @property
    def temperature(self) -> float | None: ...

    @property
    def top_p(self) -> float | None: ...

    @property
    def extra(self) -> Mapping[str, Any]: ...


# needlescope's, when a config gives none (needlescope.config's Generation)
DEFAULT_TEMPERATURE = 0.0
ANTHROPIC_MIN_THINKING = 1024
# Gemini 2.5's documented thinkingBudget ranges (besides -1, dynamic); 0 turns thinking off
# where the model allows it. Other models: -1 to the largest of these.
GEMINI_BUDGETS = (  # (model id prefix, lowest budget, highest budget, may be 0)
    ("gemini-2.5-pro", 128, 32_768, False),
    ("gemini-2.5-flash-lite", 512, 24_576, True),
    ("gemini-2.5-flash", 1, 24_576, True),
)
GEMINI_MAX_BUDGET = 32_768


def check_generation(
    provider: str, model: str | None, generation: Generation, *, reasoning_params: bool
) -> None:
    """Raise ``RuleError("generation.<field>: …")`` for a setting ``provider`` refuses."""
    extra = dict(generation.extra)
    if provider == "anthropic":
        _anthropic(generation, extra)
    elif provider == "gemini":
        _gemini(model, extra)
    elif provider in ("openai", "local"):
        _openai(model, generation, extra, reasoning_params)


def _chosen_temperature(generation: Generation) -> float | None:
    """A temperature other than needlescope's default (0), or None. A stored config names
    every field, so the value, not whether the file wrote it, tells a choice apart."""
    value = generation.temperature
    return None if value is None or value == DEFAULT_TEMPERATURE else value


def _number(extra: Mapping[str, Any], key: str) -> float | None:
    value = extra.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(f"generation.extra.{key}: must be a number, got {value!r}")
    return float(value)


def _in_range(value: float | None, field: str, low: float, high: float, api: str) -> None:
    if value is not None and not low <= value <= high:
        raise RuleError(f"{field}: {api} accepts {low:g} to {high:g}, got {value:g}")


def _anthropic(generation: Generation, extra: dict[str, Any]) -> None:
    api = "Anthropic's Messages API"
    _in_range(generation.temperature, "generation.temperature", 0, 1, api)
    _in_range(_number(extra, "temperature"), "generation.extra.temperature", 0, 1, api)
    _in_range(_number(extra, "top_p"), "generation.extra.top_p", 0, 1, api)
    top_k = extra.get("top_k")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0):
        raise RuleError(f"generation.extra.top_k: must be a whole number ≥ 0, got {top_k!r}")
    thinking = anthropic_thinking(extra)
    kind = thinking.get("type")
    if kind not in (None, "enabled", "disabled", "adaptive"):
        raise RuleError(
            f"generation.extra.thinking.type: {kind!r} is not one of enabled, disabled, adaptive"
        )
    if kind not in ("enabled", "adaptive"):
        return
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise RuleError("generation.extra.thinking.budget_tokens: required with thinking")
        if budget < ANTHROPIC_MIN_THINKING:
            raise RuleError(
                f"generation.extra.thinking.budget_tokens: must be at least"
                f" {ANTHROPIC_MIN_THINKING} (Anthropic's minimum), got {budget}"
            )
        limit = extra.get("max_tokens")
        if isinstance(limit, int) and limit <= budget:
            raise RuleError(
                f"generation.extra.max_tokens: must be larger than thinking.budget_tokens"
                f" ({budget}), got {limit}"
            )
    temperature = _chosen_temperature(generation)
    if temperature is not None:
        raise RuleError(
            f"generation.temperature: Anthropic allows no temperature with thinking, got"
            f" {temperature:g} (leave it out: it is not sent)"
        )
    if "temperature" in extra:
        raise RuleError("generation.extra.temperature: Anthropic allows none with thinking")
    if "top_k" in extra:
        raise RuleError("generation.extra.top_k: Anthropic allows none with thinking")
    top_p = _number(extra, "top_p")
    if top_p is not None and not 0.95 <= top_p <= 1:
        raise RuleError(
            f"generation.extra.top_p: with thinking Anthropic accepts 0.95 to 1, got {top_p:g}"
        )


def _gemini(model: str | None, extra: dict[str, Any]) -> None:
    api = "the Gemini API"
    flat = {camel(k): v for k, v in extra.items()}
    nested = flat.get("generationConfig")
    if isinstance(nested, Mapping):
        flat.update({camel(k): v for k, v in nested.items()})
    _in_range(_number(flat, "temperature"), "generation.extra.temperature", 0, 2, api)
    _in_range(_number(flat, "topP"), "generation.extra.topP", 0, 1, api)
    limit = flat.get("maxOutputTokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise RuleError(
            f"generation.extra.maxOutputTokens: must be a whole number ≥ 1, got {limit!r}"
        )
    thinking = gemini_thinking(extra)
    if not thinking:
        return
    budget = thinking.get("thinkingBudget")
    field = "generation.extra.thinkingConfig.thinkingBudget"
    if budget is not None and thinking.get("thinkingLevel") is not None:
        raise RuleError(
            f"{field}: give thinkingBudget or thinkingLevel, not both (the API refuses both)"
        )
    if budget is None or budget == -1:
        return
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise RuleError(f"{field}: must be a whole number, got {budget!r}")
    low, high, may_be_zero = 0, GEMINI_MAX_BUDGET, True
    name = bare_name(model)
    for prefix, lowest, highest, zero_ok in GEMINI_BUDGETS:
        if name.startswith(prefix):
            low, high, may_be_zero = lowest, highest, zero_ok
            break
    if budget == 0 and may_be_zero:
        return
    if not low <= budget <= high:
        allowed = f"-1, {'0, ' if may_be_zero else ''}or {low} to {high}"
        raise RuleError(f"{field}: {model} accepts {allowed}, got {budget}")


def _openai(
    model: str | None, generation: Generation, extra: dict[str, Any], reasoning_params: bool
) -> None:
    api = "the chat-completions API"
    _in_range(_number(extra, "top_p"), "generation.extra.top_p", 0, 1, api)
    for key in ("presence_penalty", "frequency_penalty"):
        _in_range(_number(extra, key), f"generation.extra.{key}", -2, 2, api)
    if not reasoning_params:
        return
    temperature = _chosen_temperature(generation)
    if temperature is not None and temperature != 1:
        raise RuleError(
            f"generation.temperature: {model} is a reasoning model and takes only the default"
            f" (1), got {temperature:g} (leave it out: it is not sent)"
        )
    if "max_tokens" in extra:
        raise RuleError(
            f"generation.extra.max_tokens: {model} takes max_completion_tokens, not max_tokens"
        )
    if generation.top_p is not None and generation.top_p != 1:
        raise RuleError(
            f"generation.top_p: {model} is a reasoning model and takes no top_p"
            f" (openai_reasoning_params), got {generation.top_p:g}"
        )
