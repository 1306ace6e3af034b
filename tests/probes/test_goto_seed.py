"""The Little Retrieval Test in the seed's own terms: the `goto-seed` template, the seed's
instruction position (`instruction_at: seed`), the README's block shuffle (`shuffle_block`),
the seed's reading of a reply, and digits of any script in every goto grade."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._file import load_config
from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.errors import ConfigError
from needlescope.grading.by_hand import grade_one
from needlescope.grid._cells import Cell
from needlescope.probes.goto import probe as goto
from needlescope.probes.goto.entry import GotoProbe

SEED_INSTRUCTION = (
    "[EXECUTE THIS]: Go to line {k} and report only REGISTER_CONTENT, without any context or "
    "additional text, just the number, then EXIT"
)


def sweep(seed: int = 1, **probe: Any) -> SweepConfig:
    entry = {
        "probe": "goto",
        "line_counts": [5],
        "orders": ["ordered"],
        "prompts": ["goto-seed"],
        "instruction_at": "seed",
        **probe,
    }
    return parse_config(
        {
            "name": "lrt",
            "seed": seed,
            "models": [{"name": "m", "provider": "local"}],
            "probes": [entry],
        }
    )


def cells(config: SweepConfig) -> list[Cell]:
    (probe,) = config.probes
    assert isinstance(probe, GotoProbe)
    return list(goto.expand(config, probe))


def seed_cell(seed: int = 1, **probe: Any) -> Cell:
    (only,) = cells(sweep(seed, **probe))
    return only


def seed_file(values: list[int], k: int, shown: list[int] | None = None) -> str:
    """The seed's construction, written out: a list of the header entry and one entry per
    line as shown, each ending in a newline; the instruction inserted at index k − 1; the
    entries joined and the last newline dropped."""
    entries = ["Testing Long Context\n\n"]
    entries += [f"line {i}: REGISTER_CONTENT is <{values[i - 1]}>\n" for i in shown or []]
    if shown is None:
        entries += [f"line {i}: REGISTER_CONTENT is <{v}>\n" for i, v in enumerate(values, 1)]
    entries.insert(k - 1, SEED_INSTRUCTION.format(k=k) + "\n")
    return "".join(entries)[:-1]


# -- the file for a fixed draw ------------------------------------------------------------

# Config seed 1, five ordered lines: the cell's own random.Random draws five values with
# randint(1, 50000), then k with randint(1, 5) — 46570 38729 29677 14363 33010, and k = 4 — and
# the instruction goes to index k − 1 = 3 of [header, line 1, …, line 5]: after line 2.
GOLDEN_FILE = (
    "Testing Long Context\n"
    "\n"
    "line 1: REGISTER_CONTENT is <46570>\n"
    "line 2: REGISTER_CONTENT is <38729>\n"
    "[EXECUTE THIS]: Go to line 4 and report only REGISTER_CONTENT, without any context or "
    "additional text, just the number, then EXIT\n"
    "line 3: REGISTER_CONTENT is <29677>\n"
    "line 4: REGISTER_CONTENT is <14363>\n"
    "line 5: REGISTER_CONTENT is <33010>"
)


def test_the_file_of_a_fixed_draw_is_the_seeds_byte_for_byte() -> None:
    cell = seed_cell(1)
    rendered = goto.render(cell, None, goto.FILLER, 0)
    assert rendered.haystack_text == GOLDEN_FILE
    assert rendered.prompt_text == "Here are the file contents:\n" + GOLDEN_FILE
    assert rendered.expected == 14363
    assert rendered.facts["k"] == 4 and rendered.facts["grading"] == "seed"
    assert rendered.facts["instruction_above_header"] is False
    (offset,) = rendered.offsets
    assert GOLDEN_FILE[offset:].startswith("line 4: REGISTER_CONTENT is <14363>")


def test_values_and_k_are_the_rules_draws_from_the_cells_seed() -> None:
    cell = seed_cell(1)
    rng = random.Random(cell.rng_seed)
    values = [rng.randint(1, 50_000) for _ in range(5)]
    k = rng.randint(1, 5)
    assert (values, k) == ([46570, 38729, 29677, 14363, 33010], 4)
    assert goto.render(cell, None, goto.FILLER, 0).haystack_text == seed_file(values, k)


# Config seeds whose five-line draws have k = 1, 2 and n (= 5).
K_1, K_2, K_N = 4, 2, 7


def test_k_1_puts_the_instruction_before_the_header() -> None:
    rendered = goto.render(seed_cell(K_1), None, goto.FILLER, 0)
    values = rendered.facts["line_values"]
    assert rendered.facts["k"] == 1
    assert rendered.haystack_text == (
        SEED_INSTRUCTION.format(k=1) + "\nTesting Long Context\n\n"
        f"line 1: REGISTER_CONTENT is <{values[0]}>\n"
        f"line 2: REGISTER_CONTENT is <{values[1]}>\n"
        f"line 3: REGISTER_CONTENT is <{values[2]}>\n"
        f"line 4: REGISTER_CONTENT is <{values[3]}>\n"
        f"line 5: REGISTER_CONTENT is <{values[4]}>"
    )
    assert rendered.haystack_text == seed_file(values, 1)
    assert rendered.facts["instruction_above_header"] is True
    assert rendered.facts["instruction_position"] == 0
    assert rendered.facts["instruction_before_target"] is True
    assert rendered.facts["distance"] == 3  # instruction, header, blank row, then line 1


def test_k_2_puts_the_instruction_after_the_header_before_line_1() -> None:
    rendered = goto.render(seed_cell(K_2), None, goto.FILLER, 0)
    values = rendered.facts["line_values"]
    assert rendered.facts["k"] == 2
    assert rendered.haystack_text.startswith(
        "Testing Long Context\n\n" + SEED_INSTRUCTION.format(k=2) + "\nline 1: "
    )
    assert rendered.haystack_text == seed_file(values, 2)
    assert rendered.facts["instruction_above_header"] is False
    assert (rendered.facts["instruction_position"], rendered.facts["distance"]) == (0, 2)


def test_k_n_puts_the_instruction_after_line_n_minus_2() -> None:
    rendered = goto.render(seed_cell(K_N), None, goto.FILLER, 0)
    values = rendered.facts["line_values"]
    assert rendered.facts["k"] == 5
    rows = rendered.haystack_text.split("\n")
    assert rows[4].startswith("line 3: ") and rows[5] == SEED_INSTRUCTION.format(k=5)
    assert rows[6].startswith("line 4: ") and rows[7].startswith("line 5: ")
    assert rendered.haystack_text == seed_file(values, 5)
    assert rendered.facts["instruction_position"] == 3
    assert rendered.facts["distance"] == 2  # instruction, line 4, line 5


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 40),
    seed=st.integers(0, 2**31),
    order=st.sampled_from(["ordered", "shuffled"]),
    block=st.none() | st.integers(1, 12),
    prompt=st.sampled_from(sorted(goto.GOTO_TEMPLATES)),
)
def test_the_seeds_position_holds_for_every_file(
    n: int, seed: int, order: str, block: int | None, prompt: str
) -> None:
    """Index k − 1 of the seed's list, whatever the order, block size or template."""
    extra: dict[str, Any] = {} if order == "ordered" or block is None else {"shuffle_block": block}
    cell = seed_cell(seed, line_counts=[n], orders=[order], prompts=[prompt], **extra)
    rendered = goto.render(cell, None, goto.FILLER, 0)
    rows = rendered.haystack_text.split("\n")
    head = 2  # a header row and a blank row: one entry of the seed's list
    k = rendered.facts["k"]
    instruction = next(i for i, row in enumerate(rows) if row.startswith("[EXECUTE THIS]"))
    entry = 0 if instruction == 0 else instruction - head + 1  # its index in the seed's list
    assert entry == k - 1
    assert instruction != 1  # never between the header and its blank row
    shown = rendered.facts["shown_order"]
    if prompt == goto.SEED_TEMPLATE:
        assert rendered.haystack_text == seed_file(rendered.facts["line_values"], k, shown)
    target = rows.index(f"line {k}: REGISTER_CONTENT is <{rendered.expected}>")
    assert rendered.facts["distance"] == abs(target - instruction)
    assert rendered.facts["instruction_before_target"] == (instruction < target)


# -- values, budget, cells ----------------------------------------------------------------


def test_seed_values_are_uniform_in_1_to_50000_and_may_repeat() -> None:
    # More lines than values: repeats are certain, and no value_max stands in the way.
    config = sweep(line_counts=[50_001], value_max=10)
    (cell,) = cells(config)
    assert cell.params()["value_max"] == 50_000
    values = goto.render(cell, None, goto.FILLER, 0).facts["line_values"]
    assert len(values) == 50_001 and min(values) >= 1 and max(values) <= 50_000
    assert len(set(values)) < len(values)
    assert min(values) < 1_000 and max(values) > 49_000  # spread over the whole range


def test_needlescopes_templates_keep_distinct_values_beside_the_seeds() -> None:
    with pytest.raises(ConfigError, match="distinct value with goto-v1"):
        sweep(line_counts=[50], value_max=20, prompts=["goto-seed", "goto-v1"])


def test_the_seeds_answer_budget_is_10_tokens_unless_configured() -> None:
    cell = seed_cell(1)
    assert goto.answer_budget(cell, None) == 10
    assert goto.answer_budget(cell, 64) == 64
    own = dataclasses.replace(cell, prompt_version="goto-v1")
    assert goto.answer_budget(own, None) == 16


def test_new_settings_join_a_cells_params_only_away_from_their_defaults() -> None:
    plain = cells(sweep(instruction_at="random", orders=["ordered", "shuffled"]))
    seeded = cells(sweep(orders=["ordered", "shuffled"], shuffle_block=10))
    assert [c.params() for c in plain] == [
        {"order": "ordered", "value_max": 50_000},
        {"order": "shuffled", "value_max": 50_000},
    ]
    assert [c.params() for c in seeded] == [
        {"order": "ordered", "value_max": 50_000, "instruction_at": "seed"},
        {"order": "shuffled", "value_max": 50_000, "instruction_at": "seed", "shuffle_block": 10},
    ]
    assert {c.filler_spec for c in plain} == {'{"format":"lrt-seed","kind":"lines"}'}
    own = cells(sweep(prompts=["goto-v1"], instruction_at="random"))
    assert [c.params() for c in own] == [{"order": "ordered", "value_max": 10_000}]
    assert own[0].filler_spec == goto.FILLER_SPEC


def test_the_default_position_is_still_drawn_apart_from_k() -> None:
    config = sweep(instruction_at="random", line_counts=[30], repeats=40)
    positions = {(f.k, f.instruction_position) for f in (goto.draw_file(c) for c in cells(config))}
    assert all(0 < position < 30 for _, position in positions)
    assert any(position != max(k - 2, 0) for k, position in positions)


# -- the README's block shuffle -----------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 60), block=st.integers(1, 15), seed=st.integers(0, 2**31))
def test_block_shuffle_moves_whole_blocks_in_order(n: int, block: int, seed: int) -> None:
    cell = seed_cell(seed, line_counts=[n], orders=["shuffled"], shuffle_block=block)
    shown = goto.render(cell, None, goto.FILLER, 0).facts["shown_order"]
    blocks = [list(range(s, min(s + block, n + 1))) for s in range(1, n + 1, block)]
    pieces, at = [], 0
    while at < len(shown):  # cut the shown order where each block starts
        piece = next(b for b in blocks if b[0] == shown[at])
        assert shown[at : at + len(piece)] == piece  # whole, and in order inside
        pieces.append(piece)
        at += len(piece)
    assert sorted(pieces) == blocks


def test_block_shuffle_shuffles_the_blocks() -> None:
    config = sweep(line_counts=[40], orders=["shuffled"], shuffle_block=10, repeats=30)
    orders = {tuple(goto.draw_file(c).shown) for c in cells(config)}
    firsts = {order[0] for order in orders}
    assert firsts == {1, 11, 21, 31}  # every block comes first in some file
    assert len(orders) > 10


def test_one_block_leaves_the_file_in_order() -> None:
    cell = seed_cell(3, line_counts=[8], orders=["shuffled"], shuffle_block=8)
    assert goto.draw_file(cell).shown == tuple(range(1, 9))


def config_file(tmp_path: Path, probe: str) -> Path:
    path = tmp_path / "lrt.yaml"
    path.write_text(
        "name: lrt\nmodels:\n  - {name: m, provider: local}\n"
        f"probes:\n  - {{probe: goto, line_counts: [20], {probe}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("probe", "named"),
    [
        ("orders: [ordered], shuffle_block: 5", "probes.0.goto.shuffle_block: it shuffles"),
        ("shuffle_block: 0", "probes.0.goto.shuffle_block"),
        ("shuffle_block: 2.5", "probes.0.goto.shuffle_block"),
        ("instruction_at: middle", "probes.0.goto.instruction_at"),
    ],
)
def test_bad_settings_are_one_line_naming_file_and_field(
    tmp_path: Path, probe: str, named: str
) -> None:
    path = config_file(tmp_path, probe)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {named}") and "\n" not in message


# -- reading replies ----------------------------------------------------------------------

# A hand-made seed file: five lines shown 3 1 5 2 4, line 5 (k) holds 1234; 2222 is on two
# lines (the seed's values repeat), shown first as line 4.
SEED_FACTS = {
    "k": 5,
    "n": 5,
    "order": "shuffled",
    "instruction_position": 2,
    "target_position": 2,
    "instruction_before_target": True,
    "distance": 1,
    "line_values": [1111, 2222, 3333, 2222, 1234],
    "shown_order": [3, 1, 5, 4, 2],
    "grading": "seed",
}
OWN_FACTS = {key: value for key, value in SEED_FACTS.items() if key != "grading"}

# The seed's rule: the first run of digits in the reply, read as a number.
SEED_READINGS = [
    ("1234", 1234),
    ("The answer is 1234.", 1234),
    ("<1234>", 1234),
    ("01234", 1234),
    ("１２３４", 1234),  # full-width digits
    ("١٢٣٤", 1234),  # Arabic-Indic digits
    ("REGISTER_CONTENT is <१२३४>", 1234),  # Devanagari digits
    ("line 5: REGISTER_CONTENT is <1234>", 5),  # the label comes first: the seed reads 5
    ("1,234", 1),  # the seed knows no thousands separator
    ("9" * 25, int("9" * 25)),  # a number too long for a line is still the answer read
]


@pytest.mark.parametrize(("reply", "read"), SEED_READINGS)
def test_seed_grading_reads_the_first_run_of_digits(reply: str, read: int) -> None:
    grade = goto.grade(1234, SEED_FACTS, reply)
    assert grade.parse_ok is True and grade.answered == read
    assert grade.accuracy == (100.0 if read == 1234 else 0.0)


def test_seed_grading_of_the_quoted_label_is_wrong_and_says_it_answered_k() -> None:
    grade = goto.grade(1234, SEED_FACTS, "line 5: REGISTER_CONTENT is <1234>")
    assert grade.accuracy == 0.0 and grade.detail["answered_k"] is True


@pytest.mark.parametrize("reply", ["", "I don't know.", "<>", "one two three four"])
def test_seed_grading_without_digits_is_a_parse_failure(reply: str) -> None:
    grade = goto.grade(1234, SEED_FACTS, reply)
    assert grade.parse_ok is False and grade.accuracy is None
    assert grade.parse_error == "no digits in the reply"


def test_a_repeated_value_is_traced_to_the_first_line_the_file_shows() -> None:
    for facts in (SEED_FACTS, OWN_FACTS):
        grade = goto.grade(1234, facts, "2222")
        assert grade.detail["answered_line"] == 4  # shown before line 2
        assert (grade.detail["offset"], grade.detail["shown_offset"]) == (-1, 1)


# needlescope's own rule, now with digits of any script: the first number that is not a
# quoted line label, thousands separators allowed.
OWN_READINGS = [
    ("１２３４", 1234),
    ("١٢٣٤", 1234),
    ("۱۲۳۴", 1234),  # Extended Arabic-Indic (Persian) digits
    ("The value is ১২৩৪.", 1234),  # Bengali digits
    ("line ５: REGISTER_CONTENT is <١٢٣٤>", 1234),  # a quoted label in any script is skipped
    ("١,٢٣٤", 1234),
    ("１,２３４", 1234),
]


@pytest.mark.parametrize(("reply", "read"), OWN_READINGS)
def test_own_grading_reads_digits_of_any_script(reply: str, read: int) -> None:
    grade = goto.grade(1234, OWN_FACTS, reply)
    assert grade.parse_ok is True and grade.answered == read and grade.accuracy == 100.0


@pytest.mark.parametrize(
    ("facts", "reply"),
    [(OWN_FACTS, "３３３３"), (OWN_FACTS, "٣٣٣٣"), (SEED_FACTS, "３３３３"), (SEED_FACTS, "٣٣٣٣")],
)
def test_a_wrong_value_in_another_script_is_traced_to_its_line(
    facts: dict[str, Any], reply: str
) -> None:
    grade = goto.grade(1234, facts, reply)
    assert grade.accuracy == 0.0 and grade.answered == 3333
    assert grade.detail["answered_line"] == 3
    assert (grade.detail["offset"], grade.detail["shown_offset"]) == (-2, -2)
    assert json.loads(json.dumps(dict(grade.detail))) == grade.detail


def test_superscripts_and_circled_numbers_are_not_digits() -> None:
    for facts in (SEED_FACTS, OWN_FACTS):
        assert goto.grade(1234, facts, "²³ ①").parse_ok is False


def test_needlescope_grade_reads_the_seeds_way_with_its_facts() -> None:
    reply = "line 5: REGISTER_CONTENT is <１２３４>"
    seed = grade_one("goto", "1234", reply, json.dumps(SEED_FACTS))
    own = grade_one("goto", "1234", reply, json.dumps(OWN_FACTS))
    assert (seed["answered"], seed["accuracy"], seed["detail"]["answered_k"]) == (5, 0.0, True)
    assert (own["answered"], own["accuracy"]) == (1234, 100.0)


def test_a_rendered_seed_cell_grades_through_json() -> None:
    rendered = goto.render(seed_cell(1), None, goto.FILLER, 0)
    facts = json.loads(json.dumps(dict(rendered.facts)))
    assert goto.grade(rendered.expected, facts, "14363 EXIT").accuracy == 100.0
    wrong = goto.grade(rendered.expected, facts, "３８７２９")  # line 2's value, full-width
    assert wrong.accuracy == 0.0 and wrong.detail["answered_line"] == 2
    assert wrong.detail["offset"] == -2


def test_the_seed_config_is_the_seeds_experiment_in_the_e2e_budget() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "configs" / "seed-goto.yaml")
    grid = cells(config)
    assert len(grid) <= 10
    assert {(c.prompt_version, c.params()["instruction_at"]) for c in grid} == {
        ("goto-seed", "seed")
    }
    assert {c.params().get("shuffle_block") for c in grid if c.params()["order"] == "shuffled"} == {
        10
    }
    assert all(goto.answer_budget(c, config.models[0].generation.answer_tokens) == 10 for c in grid)
    assert config.models[0].generation.temperature == 0.0
    # About 20 tokens a line (measured on SmolLM2: 5,948 tokens for these prompts).
    assert sum(c.length for c in grid) * 20 <= 10_000
