"""Validity (whether an answer measures recall), reasoning room, provider rules, rerun choice
and cost with cached tokens: the pure pieces behind issue 15."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from needlescope.config._sweep import ModelConfig, Price, SweepConfig, parse_config
from needlescope.errors import ConfigError
from needlescope.flows.cli._app import app
from needlescope.flows.rerun import cells_to_rerun
from needlescope.grading.validity import parse_values, validity_of
from needlescope.grid._plan import plan
from needlescope.probes.registry import expand_with_probes
from needlescope.providers.base import Reply
from needlescope.providers.reasoning import reasoning_allowance, thinks_by_default


def reply(text: str, finish: str | None, reasoning: int | None = None, **kw: Any) -> Reply:
    return Reply(text, finish, 10, 5, reasoning, 0.1, **kw)


@pytest.mark.parametrize(
    ("text", "finish", "reasoning", "reasoned", "validity"),
    [
        ('{"1": 1234}', "stop", None, False, "valid"),
        ('{"1": 1234}', "tool_calls", None, False, "valid"),
        ('{"1": 12', "length", 0, False, "truncated"),
        ('{"1": 12', "pause_turn", None, False, "truncated"),
        ("", "length", 500, False, "thinking_exhausted"),
        ("", "stop", None, True, "thinking_exhausted"),  # whatever the finish reason
        ("  \n", "length", 0, False, "truncated"),  # cut before any visible answer
        ("", "stop", 0, False, "empty"),
        ("Sorry, no.", "refusal", None, False, "refused"),
        ("", "content_filter", 40, False, "content_filtered"),
        ("partial", "context_exceeded", None, False, "context_exceeded"),
        ('{"1": 1234}', None, None, False, "unknown"),  # no finish reason: imported rows
        ('{"1": 1234}', "other", None, False, "unknown"),
        ('{"1": 1234}', "SOMETHING_NEW", None, False, "unknown"),  # kept, never guessed
        ("", "SOMETHING_NEW", None, False, "empty"),
    ],
)
def test_validity_of_a_reply(text, finish, reasoning, reasoned, validity) -> None:
    assert validity_of(reply(text, finish, reasoning, reasoned=reasoned)) == validity


def test_validity_values_parse_and_an_unknown_one_is_named() -> None:
    assert parse_values("empty, truncated") == ["empty", "truncated"]
    with pytest.raises(ValueError, match="unknown validity 'cut'"):
        parse_values("empty,cut")


@pytest.mark.parametrize(
    ("provider", "model", "thinks"),
    [
        ("openai", "o1-preview", True),
        ("openai", "o3-mini", True),
        ("openai", "o4-mini", True),
        ("openai", "gpt-5-mini", True),
        ("openai", "openai/o3", True),  # a router's vendor prefix
        ("openai", "deepseek-reasoner", True),
        ("openai", "gpt-4o", False),
        ("openai", "deepseek-chat", False),
        ("gemini", "gemini-2.5-flash", True),
        ("gemini", "models/gemini-3-pro-preview", True),
        ("gemini", "gemini-2.0-flash", False),
        ("anthropic", "claude-sonnet-4-5", False),  # thinks only when asked to
    ],
)
def test_which_models_think_by_default(provider, model, thinks) -> None:
    assert thinks_by_default(provider, model) is thinks


@pytest.mark.parametrize(
    ("provider", "extra", "reasoning", "room"),
    [
        ("openai", {}, True, 16_384),
        ("openai", {"reasoning_effort": "high"}, False, 0),
        ("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 2048}}, False, 2048),
        ("anthropic", {"thinking": {"type": "adaptive"}}, False, 16_384),
        ("anthropic", {"thinking": {"type": "disabled"}}, True, 0),
        ("gemini", {"thinkingConfig": {"thinkingBudget": 1024}}, True, 1024),
        ("gemini", {"thinking_config": {"thinking_budget": 512}}, False, 512),
        ("gemini", {"thinkingConfig": {"thinkingBudget": -1}}, True, 16_384),  # dynamic
        ("gemini", {"thinkingConfig": {"thinkingBudget": 0}}, True, 0),
        ("gemini", {"thinkingConfig": {"thinkingLevel": "low"}}, False, 16_384),
        ("gemini", {"generationConfig": {"thinkingConfig": {"thinkingBudget": 64}}}, True, 64),
        ("gemini", {}, True, 16_384),  # Gemini 2.5 thinks without a thinkingConfig
        ("gemini", {}, False, 0),
    ],
)
def test_reasoning_room_beside_the_answer(provider, extra, reasoning, room) -> None:
    assert reasoning_allowance(provider, extra, reasoning=reasoning, reasoning_budget=16_384) == (
        room
    )


def model(**fields: Any) -> ModelConfig:
    return ModelConfig.model_validate({"name": "m", **fields})


def test_model_settings_and_the_output_limit_sent() -> None:
    o3 = model(provider="openai", base_url="http://x/v1", model="o3-mini")
    assert o3.thinks and o3.sends_reasoning_params and o3.output_limit(100) == 16_484
    local_o3 = model(provider="openai", base_url="http://x/v1", model="o3", reasoning_budget=900)
    assert local_o3.output_limit(100) == 1000
    forced = model(provider="openai", base_url="http://x/v1", model="qwq", reasoning=True)
    assert forced.thinks and not forced.sends_reasoning_params
    legacy = model(
        provider="openai", base_url="http://x/v1", model="o3", openai_reasoning_params=False
    )
    assert not legacy.sends_reasoning_params
    gemini = model(
        provider="gemini",
        model="gemini-2.5-flash",
        generation={"extra": {"thinkingConfig": {"thinkingBudget": 1024}}},
    )
    assert gemini.output_limit(200) == 1224
    claude = model(provider="anthropic", model="claude-x")
    assert not claude.thinks and claude.output_limit(200) == 200


def test_a_stored_config_passes_the_rules_it_passed_when_loaded() -> None:
    """A run stores its config with every field named: rerun must read it back."""
    config = parse_config(
        {
            "name": "c",
            "models": [
                {"name": "o3", "provider": "openai", "base_url": "http://x/v1", "model": "o3"},
                {
                    "name": "claude",
                    "provider": "anthropic",
                    "model": "claude-x",
                    "generation": {
                        "extra": {"thinking": {"type": "enabled", "budget_tokens": 1024}}
                    },
                },
            ],
            "probes": [{"probe": "goto", "line_counts": [10]}],
        }
    )
    again = SweepConfig.model_validate_json(config.model_dump_json())
    assert [m.name for m in again.models] == ["o3", "claude"]


def test_plan_counts_the_reasoning_room_too() -> None:
    def planned(name: str) -> int:
        o3 = {"name": "o3", "provider": "openai", "base_url": "http://x/v1", "model": name}
        probes = [{"probe": "goto", "line_counts": [10], "orders": ["ordered"]}]
        (row,) = plan(parse_config({"name": "c", "models": [o3], "probes": probes}))
        return row.answer_tokens

    assert planned("o3") == planned("gpt-4o") + 16_384


def test_plan_refuses_a_setting_the_api_refuses(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\nmodels:\n  - {name: g, provider: gemini, model: gemini-2.5-flash,"
        " generation: {extra: {thinkingConfig: {thinkingBudget: 30000}}}}\n"
        "probes:\n  - {probe: goto, line_counts: [10]}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert "models.0.generation.extra.thinkingConfig.thinkingBudget" in line
    assert "24576" in line and "30000" in line


def test_price_counts_cached_prompt_tokens_at_the_cached_rate() -> None:
    price = Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
    assert price.cost(1_000_000, 1_000_000, 400_000) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 8)
    plain = Price(input_per_mtok=2.0, output_per_mtok=8.0)
    assert plain.cost(1_000_000, 0, 400_000) == pytest.approx(2.0)


GRID = {
    "name": "c",
    "models": [{"name": "m", "provider": "local"}],
    "probes": [{"probe": "goto", "line_counts": [10, 20, 30, 40, 50, 60], "orders": ["ordered"]}],
}


def test_rerun_picks_retryable_failures_unless_kinds_or_validities_are_named() -> None:
    config = parse_config(GRID)
    ids = [c.cell_id for c in expand_with_probes(config)]
    graded = set(ids[:3])
    errors = {ids[3]: "server_error", ids[4]: "request_too_large"}  # ids[5]: never answered
    validity = {ids[0]: "truncated", ids[1]: "valid", ids[2]: "empty"}

    def chosen(**kw: Any) -> set[str]:
        return {c.cell_id for c in cells_to_rerun(config, graded, errors, **kw)}

    assert chosen() == {ids[3], ids[5]}  # request_too_large fails again as sent: left out
    assert chosen(error_kinds=["request_too_large"]) == {ids[4]}
    assert chosen(validities=["empty", "truncated"], answer_validity=validity) == {ids[0], ids[2]}
    assert chosen(
        validities=["truncated"], answer_validity=validity, error_kinds=["server_error"]
    ) == {ids[0], ids[3]}
    with pytest.raises(ConfigError, match="--model 'x'"):
        chosen(models=["x"])


def test_rerun_names_an_unknown_validity_in_one_line(tmp_path) -> None:
    result = CliRunner().invoke(
        app, ["rerun", "some-run", "-w", str(tmp_path), "--validity", "empty,cut"]
    )
    assert result.exit_code == 2
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert "--validity" in line and "'cut'" in line and "truncated" in line
