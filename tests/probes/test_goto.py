from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.errors import ConfigError
from needlescope.grid._cells import Cell
from needlescope.probes.base import NeedleResult
from needlescope.probes.goto import probe as goto
from needlescope.probes.goto.entry import GotoProbe
from needlescope.probes.registry import probe_module

LINE = re.compile(r"^line (\d+): REGISTER_CONTENT is <(\d+)>$")
INSTRUCTION = re.compile(r"^\[EXECUTE THIS\]: Go to line (\d+) and report only REGISTER_CONTENT")


def sweep(**probe: Any) -> SweepConfig:
    return parse_config(
        {
            "name": "t",
            "seed": 5,
            "models": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local"}],
            "probes": [{"probe": "goto", "line_counts": [10, 40], "repeats": 2, **probe}],
        }
    )


def probe(config: SweepConfig) -> GotoProbe:
    (only,) = config.probes
    assert isinstance(only, GotoProbe)
    return only


def cell(n: int = 20, order: str = "shuffled", repeat: int = 0, seed: int = 5) -> Cell:
    config = sweep(line_counts=[n], orders=[order], repeats=repeat + 1)
    first = next(c for c in goto.expand(config, probe(config)) if c.repeat == repeat)
    return dataclasses.replace(first, seed=seed)


def parse(text: str) -> tuple[list[tuple[int, int]], int, int]:
    """(line number, value) of every register row in order, the instruction's row index among
    them (how many precede it) and its k."""
    lines: list[tuple[int, int]] = []
    found: list[tuple[int, int]] = []
    for row in text.splitlines():
        if match := LINE.match(row):
            lines.append((int(match[1]), int(match[2])))
        elif match := INSTRUCTION.match(row):
            found.append((len(lines), int(match[1])))
    assert len(found) == 1
    return lines, *found[0]


def test_module_is_registered_and_sizes_itself() -> None:
    assert probe_module("goto") is goto
    assert goto.NAME == "goto"
    assert goto.FITS_FILLER is False


def test_expand_is_models_by_lines_by_orders_by_repeats() -> None:
    config = sweep()
    cells = list(goto.expand(config, probe(config)))
    assert len(cells) == 2 * 2 * 2 * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    first = cells[0]
    assert (first.length_unit, first.needle_count, first.filler) == ("lines", 1, "lines")
    assert (first.placement, first.region, first.prompt_version) == ("random", "whole", "goto-v1")
    assert json.loads(first.filler_spec) == {"kind": "lines", "format": goto.LINE_FORMAT}
    assert {json.dumps(c.params(), sort_keys=True) for c in cells} == {
        '{"order": "ordered", "value_max": 10000}',
        '{"order": "shuffled", "value_max": 10000}',
    }
    # Both models see the same file for the same grid point.
    by_context: dict[str, set[str]] = {}
    for c in cells:
        by_context.setdefault(c.context_id, set()).add(c.model)
    assert all(models == {"a", "b"} for models in by_context.values())


@pytest.mark.parametrize("order", ["ordered", "shuffled"])
def test_render_has_n_lines_one_instruction_and_the_expected_value(order: str) -> None:
    c = cell(30, order)
    rendered = goto.render(c, None, "lines", 0)
    lines, position, k = parse(rendered.haystack_text)
    assert len(lines) == 30
    assert sorted(number for number, _ in lines) == list(range(1, 31))
    values = dict(lines)
    assert len(set(values.values())) == 30  # distinct, so a value names its line
    assert all(1 <= v <= 10000 for v in values.values())
    assert rendered.expected == values[k]
    assert rendered.haystack_text in rendered.prompt_text
    assert rendered.haystack_text.splitlines()[0] == goto.HEADER
    if order == "ordered":
        assert [number for number, _ in lines] == list(range(1, 31))
    assert 0 < position < 30


def test_facts_match_the_text() -> None:
    for repeat in range(4):
        rendered = goto.render(cell(25, "shuffled", repeat), None, "lines", 0)
        text = rendered.haystack_text
        lines, position, k = parse(text)
        facts = rendered.facts
        assert facts["k"] == k and facts["n"] == 25 and facts["order"] == "shuffled"
        assert facts["instruction_position"] == position
        assert facts["shown_order"] == [number for number, _ in lines]
        assert facts["line_values"] == [dict(lines)[i] for i in range(1, 26)]
        target = facts["shown_order"].index(k)
        assert facts["target_position"] == target
        assert facts["instruction_before_target"] == (position <= target)
        rows = text.splitlines()
        target_row = rows.index(f"line {k}: REGISTER_CONTENT is <{rendered.expected}>")
        instruction_row = next(i for i, row in enumerate(rows) if row.startswith("[EXECUTE"))
        assert facts["distance"] == abs(target_row - instruction_row)
        (offset,) = rendered.offsets
        assert text[offset:].startswith(f"line {k}: ")
        assert text[offset - 1] == "\n"
        assert rendered.fractions == (offset / len(text),)
        assert json.loads(json.dumps(facts)) == facts


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(3, 60),
    seed=st.integers(0, 2**31),
    repeat=st.integers(0, 3),
    order=st.sampled_from(["ordered", "shuffled"]),
)
def test_shuffled_is_a_real_permutation_and_instruction_is_inside(
    n: int, seed: int, repeat: int, order: str
) -> None:
    c = dataclasses.replace(cell(n, order), seed=seed, repeat=repeat)
    lines, position, k = parse(goto.render(c, None, "lines", 0).haystack_text)
    numbers = [number for number, _ in lines]
    assert sorted(numbers) == list(range(1, n + 1))
    assert (numbers == sorted(numbers)) == (order == "ordered")
    assert 0 < position < n
    assert 1 <= k <= n


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_files_still_render(n: int) -> None:
    rendered = goto.render(cell(n), None, "lines", 0)
    lines, _, k = parse(rendered.haystack_text)
    assert len(lines) == n and rendered.expected == dict(lines)[k]


def test_render_is_deterministic_per_seed_and_differs_between_repeats() -> None:
    first = goto.render(cell(20, repeat=0), None, "lines", 0)
    again = goto.render(cell(20, repeat=0), None, "lines", 0)
    other = goto.render(cell(20, repeat=1), None, "lines", 0)
    assert first == again
    assert first.haystack_text != other.haystack_text


def test_raw_template_is_the_file_alone() -> None:
    c = dataclasses.replace(cell(10), prompt_version="goto-raw-v1")
    rendered = goto.render(c, None, "lines", 0)
    assert rendered.prompt_text == rendered.haystack_text


def test_more_lines_than_distinct_values_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="need value_max"):
        sweep(line_counts=[11], value_max=10)


def test_answer_budget_is_small_unless_configured() -> None:
    assert goto.answer_budget(cell(), None) == 16
    assert goto.answer_budget(cell(), 64) == 64


# A hand-made file: lines 1..5 shown in the order 3 1 5 2 4, the instruction after 2 rows.
FACTS = {
    "k": 5,
    "n": 5,
    "order": "shuffled",
    "instruction_position": 2,
    "target_position": 2,
    "instruction_before_target": True,
    "distance": 1,
    "line_values": [1111, 2222, 3333, 4444, 1234],
    "shown_order": [3, 1, 5, 2, 4],
}


EXACT = ["1234", "<1234>", " < 1234 > \n", "The answer is 1234.", "1,234", "01234"]
QUOTED = ["line 5: REGISTER_CONTENT is <1234>", "Line 5 holds 1234"]


@pytest.mark.parametrize("reply", EXACT + QUOTED)
def test_exact_answers_are_correct(reply: str) -> None:
    grade = goto.grade(1234, FACTS, reply)
    assert grade.parse_ok and grade.accuracy == 100.0 and grade.answered == 1234
    assert grade.detail == {}
    assert grade.figures == {"correct": 1, "wrong": 0}
    assert grade.needles == (NeedleResult(1, 1234, True, "correct"),)


def test_a_value_from_another_line_is_traced_to_it() -> None:
    grade = goto.grade(1234, FACTS, "2222")
    assert grade.parse_ok and grade.accuracy == 0.0
    assert grade.detail == {
        "answered_value": 2222,
        "answered_line": 2,
        "offset": -3,
        "shown_offset": 1,
        "answered_k": False,
        "instruction_before_target": True,
        "distance": 1,
    }
    assert grade.needles == (NeedleResult(1, 1234, False, "wrong"),)


def test_a_number_on_no_line_has_no_answered_line() -> None:
    grade = goto.grade(1234, FACTS, "12345")
    assert grade.accuracy == 0.0
    assert grade.detail["answered_line"] is None
    assert grade.detail["offset"] is None and grade.detail["shown_offset"] is None


def test_echoing_k_is_flagged() -> None:
    grade = goto.grade(1234, FACTS, "5")
    assert grade.accuracy == 0.0 and grade.detail["answered_k"] is True


@pytest.mark.parametrize("reply", ["", "I don't know.", "Line 5", "<>", "9" * 40])
def test_no_reported_number_is_a_parse_failure(reply: str) -> None:
    grade = goto.grade(1234, FACTS, reply)
    assert not grade.parse_ok and grade.accuracy is None and grade.parse_error
    assert grade.needles == (NeedleResult(1, 1234, False, "missing"),)


def test_the_grade_of_a_rendered_cell_round_trips_through_json() -> None:
    rendered = goto.render(cell(15), None, "lines", 0)
    facts = json.loads(json.dumps(rendered.facts))
    wrong = next(v for v in facts["line_values"] if v != rendered.expected)
    grade = goto.grade(rendered.expected, facts, f"<{wrong}>")
    line = facts["line_values"].index(wrong) + 1
    assert grade.detail["answered_line"] == line
    assert grade.detail["offset"] == line - facts["k"]
    assert json.loads(json.dumps(dict(grade.detail))) == grade.detail


@settings(max_examples=300, deadline=None)
@given(
    reply=st.text(),
    facts=st.one_of(
        st.just(FACTS),
        st.just({}),
        st.dictionaries(st.sampled_from(list(FACTS)), st.none() | st.integers() | st.text()),
    ),
)
def test_grade_never_raises(reply: str, facts: dict[str, Any]) -> None:
    grade = goto.grade(1234, facts, reply)
    assert grade.accuracy in (None, 0.0, 100.0)
    assert len(grade.needles) == 1
