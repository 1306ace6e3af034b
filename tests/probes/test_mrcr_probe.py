"""The mrcr probe wired in: config entry, cells, the conversation sent as messages, its
rebuild from the cell row, the grade's extra figures, and `needlescope grade mrcr`."""

from __future__ import annotations

import asyncio
import json
from difflib import SequenceMatcher
from pathlib import Path

import pytest

from needlescope.config._sweep import FillerSpec, parse_config
from needlescope.errors import ConfigError
from needlescope.fitting import tokens
from needlescope.grading.by_hand import grade_one
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.base import BuildTools, prompt_sha256
from needlescope.probes.build import rebuild
from needlescope.probes.mrcr import final_question
from needlescope.probes.mrcr import probe as mrcr
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.providers.base import Message

REPO = Path(__file__).resolve().parents[2]
MODEL = {"name": "m", "provider": "local"}


def config(**entry: object) -> object:
    return parse_config(
        {
            "name": "t",
            "models": [MODEL],
            "probes": [{"probe": "mrcr", "lengths": [1500, 3000], **entry}],
        }
    )


async def _count(messages: tuple[Message, ...]) -> int:
    return sum(tokens.count(m.content) for m in messages)


async def _text(text: str) -> int:
    return tokens.count(text)


TOOLS = BuildTools(measure=_text, measure_messages=_count)
NO_FILLER = filler_from_spec(FillerSpec(kind="pattern"))  # mrcr brings its own text


def test_config_defaults_and_cells() -> None:
    cells = expand_grid(config())  # type: ignore[arg-type]
    assert len(cells) == 2 * 3
    assert {(c.length, c.needle_count) for c in cells} == {
        (length, n) for length in (1500, 3000) for n in (2, 4, 8)
    }
    assert {c.probe for c in cells} == {"mrcr"} and probe_module("mrcr") is mrcr
    assert len({c.cell_id for c in cells}) == 6
    # The same config makes the same cells: every prompt rebuilds from its cell row.
    assert [c.cell_id for c in expand_grid(config())] == [c.cell_id for c in cells]  # type: ignore[arg-type]


def test_needles_are_openais_counts() -> None:
    with pytest.raises(ConfigError, match="needles"):
        config(needles=[3])


def test_conversation_is_sent_as_alternating_messages_and_rebuilds() -> None:
    (cell,) = [c for c in expand_grid(config(needles=[4])) if c.length == 3000]  # type: ignore[arg-type]
    context = asyncio.run(mrcr.build(cell, NO_FILLER, "none", TOOLS))
    messages = context.messages
    roles = [m.role for m in messages]
    assert roles == ["user", "assistant"] * ((len(roles) - 1) // 2) + ["user"]
    assert context.prompt_length == asyncio.run(_count(messages)) <= 3000
    # One more filler pair would not have fitted.
    longer = mrcr.render(cell, NO_FILLER, "none", context.filler_chars + 1)
    assert asyncio.run(_count(longer.messages)) > 3000
    expected, facts = context.expected, context.rendered.facts
    assert messages[-1].content == final_question(
        expected["nonce"], expected["ask"], expected["form"], expected["topic"]
    )
    asked = f"Write a {expected['form']} about {expected['topic']}"
    repeats = [i for i, m in enumerate(messages) if m.role == "user" and m.content == asked]
    assert len(repeats) == 4 and [messages[i + 1].content for i in repeats] == expected["replies"]
    assert facts["filler_pairs"] == context.filler_chars and facts["ask"] == expected["ask"]
    for offset, reply in zip(context.rendered.offsets, expected["replies"], strict=True):
        assert context.haystack_text[offset : offset + len(reply)] == reply
    # Rebuilt from the stored filler size alone: the same messages, byte for byte.
    again = rebuild(mrcr, cell, NO_FILLER, "none", context.filler_chars, context.prompt_length)
    assert prompt_sha256(again.rendered) == context.prompt_sha256
    assert again.max_tokens == context.max_tokens == 512


def test_grade_keeps_the_nonce_hit_and_the_wrong_occurrence_in_detail() -> None:
    expected = {
        "nonce": "aB3dE5gH7j",
        "reply": "first poem about owls",
        "ask": 1,
        "replies": ["first poem about owls", "second poem, other words entirely"],
    }
    wrong = mrcr.grade(expected, {}, "aB3dE5gH7jsecond poem, other words entirely")
    assert wrong.detail["nonce_hit"] is True and wrong.detail["wrong_occurrence"] == 2
    right = mrcr.grade(expected, {}, "aB3dE5gH7jfirst poem about owls")
    assert right.accuracy == 100.0 and right.detail["wrong_occurrence"] is None
    missed = mrcr.grade(expected, {}, "first poem about owls")
    assert missed.accuracy == 0.0 and missed.detail["nonce_hit"] is False


def test_grade_by_hand_prints_openais_ratio() -> None:
    # By hand: "a tapir poem" against "a tapir song" match "a tapir " (8), then the "o" of
    # "poem" and "song" (1): ratio 2 × 9 / (12 + 12) = 0.75.
    answer = "XyZ0123456a tapir poem"
    result = grade_one("mrcr", '{"nonce": "XyZ0123456", "reply": "a tapir song"}', answer)
    ratio = SequenceMatcher(None, "a tapir poem", "a tapir song").ratio()
    assert ratio == 0.75
    assert result["accuracy"] == 75.0
    assert result["detail"]["nonce_hit"] is True
    without = grade_one("mrcr", '{"nonce": "XyZ0123456", "reply": "a tapir song"}', "a tapir song")
    assert without["accuracy"] == 0.0 and without["detail"]["nonce_hit"] is False
    json.dumps(result)  # printable as one JSON object


def test_shipped_config_is_small() -> None:
    from needlescope.config._file import load_config

    shipped = load_config(REPO / "configs" / "mrcr.yaml")
    cells = expand_grid(shipped)
    assert 0 < len(cells) <= 8 and sum(c.length for c in cells) <= 8000
    assert {c.probe for c in cells} == {"mrcr"}
