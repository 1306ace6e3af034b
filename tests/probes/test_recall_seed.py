"""The recall seed's experiment, exactly: its prompt, needle ranges, lengths, parsing and grading.

Every expected figure below is worked out by hand from the seed's rules (docs/probes/recall.md,
"Reproducing the recall seed"), not read back from needlescope.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError
from needlescope.grading.recall import extract_answer, grade_recall, read_reply
from needlescope.haystack._fillers import PatternFiller
from needlescope.haystack._insert import insert_at
from needlescope.haystack._needle_ranges import parse_needle_ranges, seed_positions
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_grid
from needlescope.probes.templates import RECALL_TEMPLATES

# The seed's prompt as its code has it (the dash is an en dash), then the haystack.
SEED_PREFIX = (
    "Please give me an answer worth $200, think very carefully, and give me the best possible "
    "response.Extract all pure four-digit numbers (i.e., 1000\u20139999) interspersed within "
    "the text below, and output the numbers and their order of appearance in a JSON format "
    'following the example below:\n{\n"1": 123,\n"2": 234,\n"3": 345\n}\n---\n'
)


def seed_config(**probe: object) -> dict[str, object]:
    entry = {
        "probe": "recall",
        "prompts": ["recall-seed"],
        "lengths": [40000],
        "length_unit": "chars",
        "length_budget": "haystack",
        "needle_counts": [40],
        **probe,
    }
    return {
        "name": "seed",
        "models": [
            {"name": "m", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x"}
        ],
        "probes": [entry],
    }


def positions(spec: str, needles: int, chars: int, jitter: float = 0.0) -> list[int]:
    return seed_positions(spec, needles, chars, jitter, random.Random(0))


# --------------------------------------------------------------------------- the prompt


def test_seed_prompt_is_its_326_bytes_then_the_haystack() -> None:
    prompt = RECALL_TEMPLATES["recall-seed"].render(digits=4, haystack="a|a|7777a|")
    assert len(SEED_PREFIX.encode()) == 326
    assert prompt == SEED_PREFIX + "a|a|7777a|"


def test_forty_needles_in_forty_thousand_characters_make_the_seeds_bytes_40486() -> None:
    config = parse_config(seed_config())
    (cell,) = expand_grid(config)
    assert cell.placement == "seed"  # the default with the seed's template
    filler = PatternFiller("a|")
    haystack = filler.text(40000)
    assert haystack == ("a|" * (40000 // 2 + 1))[:40000]
    rendered = recall.render(cell, filler, "pattern", 40000)
    assert len(rendered.prompt_text.encode()) == 40486  # the seed's table bytes_40486
    assert rendered.prompt_text.startswith(SEED_PREFIX)
    assert len(rendered.expected) == 40
    assert all(1000 <= v <= 9999 for v in rendered.expected)
    # Positions index the haystack before insertion: removing the needles gives it back.
    text = rendered.haystack_text
    for offset, value in sorted(zip(rendered.offsets, rendered.expected, strict=True))[::-1]:
        assert text[offset : offset + 4] == str(value)
        text = text[:offset] + text[offset + 4 :]
    assert text == haystack


def test_seed_values_may_repeat_and_ours_never_do() -> None:
    config = parse_config(seed_config(needle_counts=[400], repeats=4))
    seeded = [recall.render(c, PatternFiller(), "pattern", 40000) for c in expand_grid(config)]
    assert any(len(set(r.expected)) < len(r.expected) for r in seeded)  # 400 of 9000: likely
    ours = parse_config(
        seed_config(prompts=["recall-en-v1"], placements=["seed"], needle_counts=[400], repeats=4)
    )
    for cell in expand_grid(ours):
        values = recall.render(cell, PatternFiller(), "pattern", 40000).expected
        assert len(set(values)) == len(values)


# --------------------------------------------------------------------------- needle ranges


def test_one_head_needle_and_thirty_nine_tail_needles() -> None:
    # 0-0.1:1 is [0, 4000): one needle at 0 + 4000 // 2. 0.9-1:39 is [36000, 40000): 38
    # needles every 4000 // 38 = 105 characters from 36000, the last at the end, 40000.
    expected = [2000] + [36000 + i * 105 for i in range(38)] + [40000]
    assert positions("0-0.1:1,0.9-1:39", 40, 40000) == expected


def test_weighted_parts_round_halves_to_even() -> None:
    # [0, 500) and [500, 1000) weigh the same: part 1 gets round(5 × 500 / 1000) = round(2.5)
    # = 2 (Python rounds halves to even), the last part what is left, 3.
    # Part 1: 0, then its end 500. Part 2: 500, 500 + 500 // 2 = 750, its end 1000.
    assert positions("0-0.5,0.5-1", 5, 1000) == [0, 500, 500, 750, 1000]


def test_three_weighted_parts() -> None:
    # [0, 200), [400, 500), [800, 1000): lengths 200, 100, 200 of 500. Part 1 gets
    # round(10 × 200 / 500) = 4, part 2 round(10 × 100 / 500) = 2, the last 10 − 6 = 4.
    # Spacing 200 // 3 = 66 in parts 1 and 3, 100 // 1 = 100 in part 2.
    assert positions("0-0.2,0.4-0.5,0.8-1", 10, 1000) == [
        0, 66, 132, 200, 400, 500, 800, 866, 932, 1000,
    ]  # fmt: skip


def test_absolute_range_is_characters_clamped_to_the_haystack() -> None:
    # 200000-240000 in 300,000 characters: 5 needles every 40000 // 4 = 10000.
    assert positions("200000-240000", 5, 300000) == [200000, 210000, 220000, 230000, 240000]
    # In 220,000 characters the range is [200000, 220000): every 20000 // 4 = 5000.
    assert positions("200000-240000", 5, 220000) == [200000, 205000, 210000, 215000, 220000]
    (part,) = parse_needle_ranges("200000-240000")
    assert not part.relative


def test_single_needle_part_sits_in_its_middle() -> None:
    # [250, 750): 250 + 500 // 2.
    assert positions("0.25-0.75:1", 1, 1000) == [500]


def test_a_part_is_relative_by_its_decimal_point_or_by_both_bounds_at_most_one() -> None:
    parts = parse_needle_ranges("0-1:1,0.5-1:1,1-2:1,200-300:1")
    assert [p.relative for p in parts] == [True, True, False, False]
    with pytest.raises(ValueError, match="within 0-1"):
        parse_needle_ranges("2.0-3")


def test_more_parts_than_needles_place_one_in_each_as_the_seed_does() -> None:
    # Each of the first four parts gets max(1, round(3 × 200 / 1000)) = 1; the last part
    # what is left, 3 − 4 < 0: none. Four needles, not three.
    spec = "0-0.2,0.2-0.4,0.4-0.6,0.6-0.8,0.8-1"
    assert positions(spec, 3, 1000) == [100, 300, 500, 700]


@given(st.floats(0.0, 1.0), st.integers(2, 30), st.integers(0, 2**32))
def test_jitter_stays_inside_its_part_and_within_its_reach(
    jitter: float, count: int, seed: int
) -> None:
    spec = "0.2-0.6"  # [200, 600) of 1000
    base = seed_positions(spec, count, 1000, 0.0, random.Random(seed))
    moved = seed_positions(spec, count, 1000, jitter, random.Random(seed))
    reach = int((400 // (count - 1)) * jitter)
    # Every needle moves by at most the reach, so the sorted positions do too.
    assert all(200 <= p <= 600 for p in moved)
    assert max(abs(a - b) for a, b in zip(moved, base, strict=True)) <= reach


def test_insertion_from_the_last_position_keeps_each_needle_at_its_index() -> None:
    inserted = insert_at("abcdef", ["1", "2", "3"], [0, 3, 3])
    assert inserted.text == "1abc23def"
    assert inserted.offsets == (0, 4, 5)


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        (
            {"regions": ["0-0.1:1,0.9-1:39"], "needle_counts": [10, 40]},
            "probes.0.recall.regions: '0-0.1:1,0.9-1:39' places 40 needles",
        ),
        ({"regions": ["0-0.5:3,0.5-1"]}, "give a count to every part or to none"),
        ({"prompts": ["recall-en-v1"], "jitter": 0.2}, "jitter: the seed's random offsets"),
        ({"digits": 5}, "recall.digits: the seed's prompt asks for four-digit numbers"),
        (
            {"prompts": ["recall-en-v1"], "regions": ["200000-240000"]},
            "absolute ranges need placements: [seed]",
        ),
        ({"needle_counts": None}, "regions: 'whole' gives no counts"),
        ({"lengths": None}, "probes.0.lengths: Field required"),
    ],
)
def test_seed_config_mistakes_are_one_line(probe: dict[str, object], message: str) -> None:
    data = seed_config(**probe)
    entry = data["probes"][0]  # type: ignore[index]
    for key in [k for k, v in probe.items() if v is None]:
        del entry[key]
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    assert "\n" not in str(raised.value)
    assert message in str(raised.value)


def test_region_counts_set_the_needle_count() -> None:
    data = seed_config(regions=["0-0.1:1,0.9-1:39", "0-0.5:2,0.5-1:3"])
    del data["probes"][0]["needle_counts"]  # type: ignore[index]
    cells = expand_grid(parse_config(data))
    assert sorted((c.region, c.needle_count) for c in cells) == [
        ("0-0.1:1,0.9-1:39", 40),
        ("0-0.5:2,0.5-1:3", 5),
    ]


def test_generation_can_omit_what_the_seed_does_not_send() -> None:
    data = seed_config()
    data["models"][0]["generation"] = {"max_tokens": "omit", "temperature": "omit"}  # type: ignore[index]
    generation = parse_config(data).models[0].generation
    assert generation.temperature is None and not generation.sends_max_tokens
    assert generation.answer_tokens is None


def test_cells_of_needlescopes_own_templates_keep_their_ids() -> None:
    # The seed's settings join the cell id only when set: a released config's cells are the same.
    data = seed_config(prompts=["recall-en-v1"], length_budget="prompt")
    (cell,) = expand_grid(parse_config(data))
    assert cell.placement == "even"
    assert cell.params() == {"digits": 4, "snap": "auto"}


# --------------------------------------------------------------------------- a corpus as it is


def test_a_corpus_used_as_it_is_gives_a_cell_per_file(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("Chapter 2 of it.", encoding="utf-8")
    (tmp_path / "a.txt").write_text("Chapter 1.", encoding="utf-8")
    data = seed_config()
    data["fillers"] = {"novel": {"kind": "corpus", "path": str(tmp_path), "fit": "none"}}
    entry = data["probes"][0]  # type: ignore[index]
    entry["fillers"] = ["novel"]
    del entry["lengths"]
    cells = expand_grid(parse_config(data))
    assert [(c.length, c.params()["file"]) for c in cells] == [(0, "a.txt"), (0, "b.txt")]
    assert all(c.as_is for c in cells) and "as-is" in cells[0].label
    data["fillers"]["novel"]["scrub_digits"] = True  # type: ignore[index]
    with pytest.raises(ConfigError, match="scrub_digits cannot be true"):
        parse_config(data)


# --------------------------------------------------------------------------- parsing and grading

EXPECTED = [1111, 2222, 3333]


def test_json_fence_content_ends_at_the_first_brace_before_a_closing_fence() -> None:
    reply = 'Here:\n```json\n{"1": 1111}\n```\nand again ```json\n{"1": 2222}\n```'
    reading = read_reply(reply)
    assert reading.source == "json-fence" and reading.values == [1111]


def test_a_fence_that_is_not_json_is_a_parse_failure_without_fall_through() -> None:
    reply = '```json\n{"1": 1111, "2": 2222,}\n```\nPlain: {"1": 1111, "2": 2222}'
    grade = grade_recall(EXPECTED, reply)
    assert grade.parse_ok is False and "not valid JSON" in (grade.parse_error or "")


def test_a_plain_fence_is_read_when_there_is_no_json_fence() -> None:
    reading = read_reply('```\n{"1": 1111, "2": 2222, "3": 3333}\n```')
    assert reading.source == "fence" and reading.values == EXPECTED


def test_a_fenced_object_is_the_answer_whatever_its_keys() -> None:
    grade = grade_recall([1111, 2222], '```json\n{"numbers": [1111, 2222]}\n```')
    # Keys sorted as strings: one value, the list, which equals neither needle: d = 2 of 2.
    assert grade.parse_ok and grade.answered == ("[1111,2222]",)
    assert grade.accuracy == 0.0
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (0, 2, 1, 0)


def test_the_first_bare_object_with_any_digit_key() -> None:
    reply = 'Format: {"a": 1}. Answer: {"1": 1111, "2": 2222, "note": "done"} {"1": 9}'
    grade = grade_recall(EXPECTED, reply)
    # "note" does not convert with int(): keys in string order "1", "2", "note".
    assert grade.answered == (1111, 2222, "done")
    assert grade.accuracy == pytest.approx((1 - 1 / 3) * 100)
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (2, 1, 1, 0)


def test_objects_nested_two_deep_are_not_found() -> None:
    assert extract_answer('{"answer": {"list": {"1": 1111}}}').obj is None


def test_an_empty_reply_is_neither_answered_nor_a_parse_failure() -> None:
    grade = grade_recall(EXPECTED, "")
    assert grade.parse_ok is None and grade.parse_error is None and grade.uncounted


@pytest.mark.parametrize(
    "reply", ['{"01": 1111, "2": 2222, "3": 3333}', '```json\n{" 1": 1111}\n```']
)
def test_a_key_that_is_not_the_number_it_names_leaves_the_answer_uncounted(reply: str) -> None:
    # int("01") == 1, but there is no key "1": the seed's analysis dropped such answers.
    grade = grade_recall(EXPECTED, reply)
    assert grade.parse_ok is True
    assert grade.accuracy is None and grade.answered is None
    assert grade.uncounted and "no key" in grade.uncounted


def test_integer_keys_order_numerically_and_others_as_strings() -> None:
    numbers = read_reply('{"2": 2222, "10": 3333, "1": 1111}')
    assert numbers.values == [1111, 2222, 3333]
    strings = read_reply('{"2": 2222, "10": 3333, "1": 1111, "x": 0}')
    assert strings.values == [1111, 3333, 2222, 0]


def test_a_string_is_not_the_number_it_spells() -> None:
    grade = grade_recall(EXPECTED, '{"1": "1111", "2": 2222, "3": 3333}')
    assert grade.accuracy == pytest.approx((1 - 1 / 3) * 100) and grade.wrong == 1


def test_seed_prompt_hash_is_stable() -> None:
    # A released template never changes: its text is pinned by hash as well as by bytes.
    text = RECALL_TEMPLATES["recall-seed"].render(digits=4, haystack="")
    assert (
        hashlib.sha256(text.encode()).hexdigest()
        == hashlib.sha256(SEED_PREFIX.encode()).hexdigest()
    )


# --------------------------------------------------------------------------- what is sent


def test_a_seed_exact_request_carries_only_the_model_and_the_messages() -> None:
    from needlescope.probes.build import rebuild
    from needlescope.providers.openai import OpenAIProvider
    from needlescope.tasks.query import request_for

    data = seed_config()
    data["models"][0]["generation"] = {"max_tokens": "omit", "temperature": "omit"}  # type: ignore[index]
    config = parse_config(data)
    (cell,) = expand_grid(config)
    context = rebuild(recall, cell, PatternFiller(), "pattern", 40000, 40000)
    request = request_for(context, config)
    provider = OpenAIProvider(name="m", base_url="http://127.0.0.1:9/v1", model="x", api_key=None)
    body = provider.request_body(request)
    assert set(body) == {"model", "messages"}
    assert body["messages"] == [{"role": "user", "content": context.prompt_text}]


def test_only_context_with_an_api_tokenizer_is_one_line_before_anything_starts(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from needlescope.flows.cli._app import app

    config = tmp_path / "c.yaml"
    config.write_text(
        "name: c\nmodels: [{name: claude, provider: anthropic, model: claude-x,"
        " api_key_env: NEEDLESCOPE_UNSET_KEY}]\n"
        "probes: [{probe: recall, lengths: [300], needle_counts: [4]}]\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["run", str(config), "--only-context", "-w", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "counted by its API (count_tokens)" in lines[0]
