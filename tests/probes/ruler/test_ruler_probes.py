"""RULER's families as needlescope probes: their config entries (and one-line errors), their
cells, the answer prefix sent as a prefill or appended per provider, a prompt rebuilt exactly
from its cell row, and RULER's grading with its per-string outcomes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from needlescope.config._file import load_config
from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.errors import ConfigError
from needlescope.grid._cells import Cell
from needlescope.haystack._fillers import Filler, PatternFiller, filler_from_spec
from needlescope.probes.base import BuildTools, Context, answer_tables, prompt_sha256
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.probes.ruler import common as ruler
from needlescope.probes.ruler.templates import TEMPLATES

REPO = Path(__file__).resolve().parents[3]


def config(probes: list[dict[str, Any]], *models: dict[str, Any]) -> SweepConfig:
    chosen = list(models) or [{"name": "m", "provider": "local"}]
    return parse_config({"name": "r", "seed": 5, "models": chosen, "probes": probes})


async def _count(text: str) -> int:
    return len(text) // 4


async def _count_messages(messages: tuple[Any, ...]) -> int:
    return sum(len(m.content) for m in messages) // 4 + 7  # a chat template's few tokens


def filler_of(cfg: SweepConfig, cell: Cell) -> Filler:
    if cell.filler.startswith("ruler-"):  # a haystack RULER's code makes: no filler
        return PatternFiller(" ")
    return filler_from_spec(cfg.filler_spec(cell.filler))


def build(cfg: SweepConfig, cell: Cell) -> Context:
    filler = filler_of(cfg, cell)
    tools = BuildTools(_count, _count, _count_messages, None)
    return asyncio.run(probe_module(cell.probe).build(cell, filler, "x", tools))


ALL_ELEVEN = [
    {"probe": "niah", "presets": ["niah_single_1", "niah_multikey_2", "niah_multivalue"]},
    {"probe": "variable_tracking"},
    {"probe": "aggregation", "task": "cwe"},
    {"probe": "aggregation", "task": "fwe"},
]


def test_cells_carry_ruler_parameters_and_budgets() -> None:
    cfg = config([{**p, "lengths": [1200]} for p in ALL_ELEVEN])
    cells = expand_grid(cfg)
    assert [c.probe for c in cells] == ["niah"] * 3 + ["variable_tracking", "aggregation"] * 1 + [
        "aggregation"
    ]
    first = cells[0].params()
    assert first["preset"] == "niah_single_1" and first["type_haystack"] == "noise"
    assert first["length_budget"] == "ruler" and first["answer_prefix_mode"] == "prefill"
    assert [c.prompt_version for c in cells] == ["ruler"] * 6
    budgets = [probe_module(c.probe).answer_budget(c, None) for c in cells]
    assert budgets == [128, 128, 128, 30, 120, 50]
    assert probe_module("niah").answer_budget(cells[0], 64) == 64  # a configured budget wins
    # The haystacks RULER's code makes have no filler; niah's essay is the configured one.
    assert [c.filler for c in cells] == [
        "ruler-noise",
        "ruler-needle",
        "prose-en",
        "ruler-vt-noise",
        "ruler-cwe-words",
        "ruler-fwe-coded",
    ]
    assert [c.needle_count for c in cells] == [1, 1, 4, 5, 10, 3]


def test_cell_ids_are_stable_and_differ_by_mode() -> None:
    local = expand_grid(config([{"probe": "niah", "lengths": [900]}]))
    again = expand_grid(config([{"probe": "niah", "lengths": [900]}]))
    assert [c.cell_id for c in local] == [c.cell_id for c in again]
    appended = expand_grid(config([{"probe": "niah", "lengths": [900], "answer_prefix": "append"}]))
    assert local[0].cell_id != appended[0].cell_id
    assert local[0].context_id != appended[0].context_id  # the messages differ: so does the prompt


OPENAI = {"name": "o", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x"}
ANTHROPIC = {"name": "a", "provider": "anthropic", "model": "claude-x"}
GEMINI = {"name": "g", "provider": "gemini", "model": "gemini-x"}
LOCAL = {"name": "l", "provider": "local"}


@pytest.mark.parametrize(
    ("model", "setting", "mode"),
    [
        (LOCAL, "auto", "prefill"),
        (ANTHROPIC, "auto", "prefill"),
        ({**ANTHROPIC, "reasoning": True}, "auto", "append"),  # no prefill while thinking
        (OPENAI, "auto", "append"),
        (GEMINI, "auto", "append"),
        (OPENAI, "prefill", "prefill"),  # asked for: e.g. a vLLM or llama.cpp endpoint
        (LOCAL, "append", "append"),
    ],
)
def test_answer_prefix_mode_per_provider(model: dict[str, Any], setting: str, mode: str) -> None:
    cfg = config([{"probe": "niah", "lengths": [900], "answer_prefix": setting}], model)
    (cell,) = expand_grid(cfg)
    assert cell.params()["answer_prefix_mode"] == mode
    context = build(cfg, cell)
    prefix = context.rendered.facts["answer_prefix"]
    assert prefix.startswith(" The special magic number for ")
    assert context.prompt_text.endswith(prefix)  # RULER's input, whatever the mode
    if mode == "prefill":
        user, assistant = context.messages
        assert (user.role, assistant.role) == ("user", "assistant")
        assert assistant.content == prefix.strip() and not user.content.endswith(prefix)
    else:
        (user,) = context.messages
        assert user.role == "user" and user.content.endswith(prefix)
    assert context.rendered.facts["answer_prefix_mode"] == mode


def test_prefill_goes_out_as_each_provider_sends_a_trailing_assistant_turn() -> None:
    from needlescope.providers.anthropic import _prompt
    from needlescope.providers.openai import _wire

    cfg = config([{"probe": "variable_tracking", "lengths": [1500]}], ANTHROPIC)
    (cell,) = expand_grid(cfg)
    context = build(cfg, cell)
    body = _prompt(context.messages)["messages"]
    assert [m["role"] for m in body] == ["user", "assistant"]
    # vt's prefix ends in a space, which Anthropic refuses at the end of a prefill: stripped.
    assert body[1]["content"].endswith("they are:")
    # llama.cpp's OpenAI-compatible server gets the same two turns and continues the last.
    assert [m["role"] for m in _wire(context.messages)] == ["user", "assistant"]


@pytest.mark.parametrize("entry", ALL_ELEVEN, ids=lambda e: e.get("task", e["probe"]))
def test_prompt_is_rebuilt_exactly_from_its_cell_row(entry: dict[str, Any]) -> None:
    cfg = config([{**entry, "lengths": [1500]}])
    for cell in expand_grid(cfg):
        context = build(cfg, cell)
        stored = json.loads(json.dumps(dict(context.rendered.facts)))  # as the cells row holds
        filler = filler_of(cfg, cell)
        again = probe_module(cell.probe).rebuild(cell, filler, "x", context.filler_chars, stored)
        assert prompt_sha256(again) == context.prompt_sha256
        assert again.prompt_text == context.prompt_text
        assert again.expected == context.expected
        assert again.offsets == context.rendered.offsets
        if cell.probe != "aggregation":  # niah's values and vt's names, each where planted
            haystack = context.haystack_text
            assert [
                haystack[o : o + len(e)] for o, e in zip(again.offsets, again.expected, strict=True)
            ] == (context.expected)


def test_ruler_length_budget_keeps_tokens_to_generate() -> None:
    for budget, room in (("ruler", 1000 - 128), ("prompt", 1000)):
        cfg = config([{"probe": "niah", "lengths": [1000], "length_budget": budget}])
        (cell,) = expand_grid(cfg)
        context = build(cfg, cell)
        fitted = asyncio.run(_count(context.prompt_text))
        assert fitted <= room
        # whole units: one more essay word would not fit
        more = probe_module("niah").render(
            cell, filler_of(cfg, cell), "x", context.filler_chars + 1
        )
        assert asyncio.run(_count(more.prompt_text)) > room


def test_grade_is_string_match_all_with_per_string_outcomes() -> None:
    grade = ruler.grade(
        ["1234567", "ABCDE", "zz"],
        {"distractors": ["7654321", "QQQQQ"]},
        "  1234567 and abcde, also 7654321\x00",
    )
    assert grade.accuracy == pytest.approx(200 / 3)
    assert (grade.figures["correct"], grade.figures["missing"], grade.figures["wrong"]) == (2, 1, 1)
    assert [n.outcome for n in grade.needles] == ["correct", "correct", "missing"]
    assert grade.needles[0].expected == 1234567 and grade.needles[1].expected is None
    table = answer_tables([grade, ruler.grade(["x"], {}, "")])[ruler.RULER_OUTCOMES]
    assert table == {
        "answer": [0, 0, 0, 0, 1],
        "role": ["expected", "expected", "expected", "distractor", "expected"],
        "string_index": [1, 2, 3, 1, 1],
        "text": ["1234567", "ABCDE", "zz", "7654321", "x"],
        "found": [True, True, False, True, False],
    }
    assert ruler.grade(["x"], {}, "").accuracy == 0.0  # RULER scores an empty answer 0
    assert ruler.grade([], {}, "x").parse_ok is False  # nothing to look for: never raises


def test_niah_distractors_are_other_keys_values() -> None:
    cfg = config([{"probe": "niah", "presets": ["niah_multikey_1"], "lengths": [1500]}])
    (cell,) = expand_grid(cfg)
    context = build(cfg, cell)
    facts = context.rendered.facts
    others = [n["value"] for n in facts["needles"] if not n["asked"]]
    assert len(others) == 3 and facts["distractors"] == others
    assert facts["needle_depth"] in [n["depth"] for n in facts["needles"] if n["asked"]]
    grade = ruler.grade(context.expected, facts, f"It is {others[1]}.")
    assert grade.accuracy == 0.0 and grade.detail["distractors_found"] == [others[1]]


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        ({"probe": "niah", "presets": ["niah_single_9"]}, ("presets", "niah_single_9", "known")),
        (
            {"probe": "niah", "presets": ["niah_single_1"], "num_needle_k": 2},
            ("num_needle_k", "presets or RULER's parameters"),
        ),
        ({"probe": "niah", "type_haystack": "sand"}, ("type_haystack",)),
        ({"probe": "niah", "num_needle_k": 41}, ("num_needle_k",)),
        ({"probe": "niah", "prompts": ["ruler-v2"]}, ("prompts", "ruler-v2", "known: ruler")),
        ({"probe": "niah", "length_unit": "chars"}, ("length_unit",)),
        ({"probe": "niah", "length_budget": "haystack"}, ("length_budget",)),
        ({"probe": "niah", "answer_prefix": "sometimes"}, ("answer_prefix",)),
        ({"probe": "variable_tracking", "num_hops": 0}, ("num_hops",)),
        ({"probe": "aggregation"}, ("task",)),
        ({"probe": "aggregation", "task": "fwe", "num_cw": 5}, ("num_cw", "not a parameter of")),
        ({"probe": "aggregation", "task": "cwe", "alpha": 3}, ("alpha", "task cwe")),
        ({"probe": "aggregation", "task": "fwe", "alpha": 1.0}, ("alpha",)),
    ],
)
def test_bad_entries_are_one_line_naming_file_and_field(
    entry: dict[str, Any], names: tuple[str, ...], tmp_path: Path
) -> None:
    import yaml

    path = tmp_path / "ruler.yaml"
    text = {
        "name": "bad",
        "models": [{"name": "m", "provider": "local"}],
        "probes": [{"lengths": [1000], **entry}],
    }
    path.write_text(yaml.safe_dump(text))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message and "ruler.yaml" in message
    for name in names:
        assert name in message, message


def test_ruler_yaml_is_the_eleven_presets_within_the_e2e_caps() -> None:
    cfg = load_config(REPO / "configs" / "ruler.yaml")
    cells = expand_grid(cfg)
    assert len(cells) == 11 <= 12
    tasks = [c.params().get("preset") or c.params().get("task") or "vt" for c in cells]
    assert sorted(tasks) == sorted(
        [
            "niah_single_1",
            "niah_single_2",
            "niah_single_3",
            "niah_multikey_1",
            "niah_multikey_2",
            "niah_multikey_3",
            "niah_multivalue",
            "niah_multiquery",
            "vt",
            "cwe",
            "fwe",
        ]
    )
    assert sum(c.length for c in cells) <= 12_000
    assert set(TEMPLATES) == {"niah", "variable_tracking", "cwe", "fwe"}


def test_an_echoed_prefill_is_not_graded() -> None:
    """llama.cpp returns the prefilled turn whole: the prefix (whose words could be expected
    strings: cwe's "list") is cut before grading; Anthropic returns the continuation alone."""
    prefix = " Answer: The top 10 words that appear most often in the list are:"
    facts = {"answer_prefix": prefix, "answer_prefix_mode": "prefill"}
    echoed = ruler.grade(["list", "gear"], facts, prefix.strip() + " 1. gear 2. bolt")
    assert echoed.accuracy == 50.0 and echoed.detail["prefill_echoed"] is True
    alone = ruler.grade(["list", "gear"], facts, " 1. gear 2. bolt")
    assert alone.accuracy == 50.0 and "prefill_echoed" not in alone.detail
    # appended: the model's whole reply is its answer, as RULER grades it
    appended = ruler.grade(["list"], {**facts, "answer_prefix_mode": "append"}, prefix.strip())
    assert appended.accuracy == 100.0


async def test_anthropic_receives_the_prefill_as_the_last_assistant_turn() -> None:
    """Against the fake Messages API: the niah prompt's two turns, the prefill last and
    stripped; the reply is the continuation alone, graded as it is."""
    from needlescope.providers.anthropic import AnthropicProvider
    from needlescope.providers.base import ChatRequest
    from tests.support import anthropic_server as fake

    cfg = config([{"probe": "niah", "presets": ["niah_single_1"], "lengths": [900]}], ANTHROPIC)
    (cell,) = expand_grid(cfg)
    tools = BuildTools(_count, _count, _count_messages, None)
    context = await probe_module("niah").build(cell, PatternFiller(" "), "x", tools)
    value = context.expected[0]
    with fake.FakeAnthropicServer(lambda body: f" {value}.", api_key="k") as srv:
        provider = AnthropicProvider(name="a", base_url=srv.base_url, model="claude-x", api_key="k")
        try:
            reply = await provider.complete(ChatRequest(context.messages, max_tokens=128))
        finally:
            await provider.aclose()
        body = srv.last_body
    assert body is not None
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][1]["content"] == context.rendered.facts["answer_prefix"].strip()
    grade = probe_module("niah").grade(context.expected, context.rendered.facts, reply.text)
    assert grade.accuracy == 100.0 and "prefill_echoed" not in grade.detail
