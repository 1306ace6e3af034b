"""latent_list: every generated program runs in Python to its expected answer; the reading,
the exact-match score and the longest consistent prefix."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.haystack._fillers import NoiseFiller, PatternFiller, SyntheticProseFiller
from needlescope.probes.latent_list import (
    consistent_prefix,
    generate,
    grade,
    haystack,
    prompt,
    question,
    read_list,
    read_number,
    statements_in,
)
from needlescope.probes.latent_list.program import MAX_LENGTH, OPERATIONS, QUERIES
from needlescope.probes.latent_list.score import score


def run(lines: list[str]) -> dict[str, Any]:
    """The statements executed in order, in one namespace, as a Python session would."""
    namespace: dict[str, Any] = {"print": lambda *args: None}
    exec("\n".join(lines), namespace)  # the program is ours: checking it is the point
    return namespace


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("query", QUERIES)
def test_every_program_runs_to_its_expected_answer(seed: int, query: str) -> None:
    program = generate(seed, operations=25, irrelevant=15, query=query)  # type: ignore[arg-type]
    namespace = run([s.text for s in program.statements])
    x = namespace["x"]
    assert tuple(x) == program.final
    asked = {"list": x, "length": len(x), "element": x[program.index or 0]}[query]
    assert program.answer == asked
    assert 1 <= len(x) <= MAX_LENGTH


@pytest.mark.parametrize("seed", range(20))
def test_states_are_the_prefixes_and_irrelevant_statements_leave_x_alone(seed: int) -> None:
    program = generate(seed, operations=20, irrelevant=20)
    relevant = [s.text for s in program.statements if s.relevant]
    assert len(relevant) == 21 and len(program.states) == 21
    assert sum(not s.relevant for s in program.statements) == 20
    for k in range(len(relevant)):
        assert tuple(run(relevant[: k + 1])["x"]) == program.states[k]
    # Every operation changes x, so each prefix has a state of its own to be consistent with.
    assert all(a != b for a, b in zip(program.states, program.states[1:], strict=False))


def test_irrelevant_statements_use_other_names_and_prints() -> None:
    program = generate(2, operations=5, irrelevant=60)
    others = [s.text for s in program.statements if not s.relevant]
    assert any(t.startswith("print(") for t in others)
    assert any(t.startswith(("y", "z")) for t in others)
    assert all(not t.startswith("x") for t in others)


def test_operations_cover_every_kind_and_can_be_restricted() -> None:
    texts = " ".join(s.text for s in generate(4, operations=300, irrelevant=0).statements)
    for kind in OPERATIONS:
        assert ("x[" if kind == "setitem" else f"x.{kind}(") in texts
    only = generate(4, operations=50, irrelevant=0, kinds=("append", "pop"))
    assert all(s.text.startswith(("x.append(", "x.pop(", "x = ")) for s in only.statements)
    with pytest.raises(ValueError, match="setitem, or one that adds and one that removes"):
        generate(4, operations=5, irrelevant=0, kinds=("append", "reverse"))


def test_same_seed_same_program() -> None:
    assert generate(8, 10, 10, "element") == generate(8, 10, 10, "element")
    assert generate(8, 10, 10) != generate(9, 10, 10)


@pytest.mark.parametrize(
    "filler", [SyntheticProseFiller(), NoiseFiller(3), PatternFiller("a|"), PatternFiller("x")]
)
@pytest.mark.parametrize("chars", [0, 40, 3000])
def test_the_program_read_back_from_the_prompt_runs_to_the_answer(filler: Any, chars: int) -> None:
    program = generate(6, operations=12, irrelevant=8, query="element")
    text = prompt(program, filler.text(chars))
    found = statements_in(text)
    assert found == [s.text for s in program.statements]
    assert run(found)["x"][program.index] == program.answer
    assert text.endswith(question(program))
    assert f"What is x[{program.index}] after the last statement has run?" in text


def test_statements_spread_evenly_through_the_filler() -> None:
    program = generate(1, operations=3, irrelevant=0)
    inserted = haystack(program, SyntheticProseFiller().text(20_000))
    shares = [o / len(inserted.text) for o in inserted.offsets]
    for share, aim in zip(shares, (0.2, 0.4, 0.6, 0.8), strict=True):
        assert abs(share - aim) < 0.02


# --- reading ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("[12, 40, 7]", [12, 40, 7]),
        ("The final list is [3, 4].", [3, 4]),
        ("x = [1, 2]", [1, 2]),
        ("x[0] is gone, leaving [5, 6]", [5, 6]),  # a subscript is not an answer
        ("```python\n[ 10,\n 20 ]\n```", [10, 20]),
        ("[EXECUTE] then [7]", [7]),  # a span that does not parse is passed over
        ("[]", []),
        ("[[1, 2], 3]", [[1, 2], 3]),
        ("no list here", None),
        ("(1, 2)", None),
        ("[1, 2", None),
    ],
)
def test_read_list(answer: str, expected: Any) -> None:
    assert read_list(answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("4", 4),
        ("len(x) is 4", 4),
        ("x[3] = 57", 57),
        ("x[len(x) - 1] is 57", 57),
        ("[57]", 57),
        ("The answer is 57.", 57),
        ("Answer (57)", 57),
        ("x2 holds 3.5 then 8", 8),
        ("none", None),
        ("9" * 30, None),
    ],
)
def test_read_number(answer: str, expected: int | None) -> None:
    assert read_number(answer) == expected


# --- score and consistent prefix --------------------------------------------------------------

# x = [10, 20]; x.append(30); x.reverse(); x.pop()
WORKED = [[10, 20], [10, 20, 30], [30, 20, 10], [30, 20]]


@pytest.mark.parametrize(
    ("answered", "prefix"),
    [([30, 20], 3), ([30, 20, 10], 2), ([10, 20, 30], 1), ([10, 20], 0), ([99], None)],
)
def test_consistent_prefix_on_a_worked_sequence(answered: list[int], prefix: int | None) -> None:
    assert run(["x = [10, 20]", "x.append(30)", "x.reverse()", "x.pop()"])["x"] == WORKED[-1]
    assert consistent_prefix(WORKED, answered, "list") == prefix


def test_consistent_prefix_for_length_and_element() -> None:
    assert consistent_prefix(WORKED, 3, "length") == 2  # the longest prefix of length 3
    assert consistent_prefix(WORKED, 2, "length") == 3
    assert consistent_prefix(WORKED, 10, "element", 2) == 2  # [30, 20] has no element 2
    assert consistent_prefix(WORKED, 30, "element", 2) == 1
    assert consistent_prefix(WORKED, 20, "element", 1) == 3


def test_score_exact_match_only() -> None:
    right = score("[30, 20]", "list", [30, 20], WORKED)
    assert (right.accuracy, right.consistent_with) == (100.0, 3)
    stale = score("x is [30, 20, 10]", "list", [30, 20], WORKED)
    assert (stale.accuracy, stale.consistent_with) == (0.0, 2)
    assert score("[True]", "list", [1]).accuracy == 0.0
    assert score("[1.0]", "list", [1]).accuracy == 0.0
    unread = score("I cannot tell", "list", [30, 20], WORKED)
    assert (unread.answered, unread.accuracy, unread.consistent_with) == (None, None, None)


def test_grade_reads_a_bare_list_or_a_programs_expected() -> None:
    assert grade([30, 20], {}, "[30, 20]").accuracy == 100.0
    program = generate(5, 10, 5, "length")
    g = grade(program.expected(), {}, f"len(x) is {len(program.final)}")
    assert g.parse_ok and g.accuracy == 100.0 and g.figures["consistent_with"] == 10
    assert g.detail["operations"] == 10
    missing = grade(program.expected(), {}, "no idea")
    assert missing.parse_ok is False and missing.parse_error == "no number in the reply"


@pytest.mark.parametrize(
    "expected",
    [None, "x", {"query": "sum"}, {"query": "list", "answer": 3}, {"query": "length", "answer": []},
     {"query": "list", "answer": [1], "states": [["a"]]}, [True, 1]],
)  # fmt: skip
def test_grade_names_an_unreadable_expected(expected: object) -> None:
    g = grade(expected, {}, "[1]")
    assert g.parse_ok is False and g.parse_error == "expected is not a latent-list answer"


def test_grade_stores_a_literal_json_cannot_hold_as_text() -> None:
    g = grade([1], {}, "[{1, 2}, b'x']")
    assert g.accuracy == 0.0 and g.answered == "[{1, 2}, b'x']"


@settings(max_examples=400, deadline=None)
@given(st.text(), st.sampled_from(QUERIES))
def test_scorers_never_raise(answer: str, query: str) -> None:
    program = generate(3, 6, 2, query)  # type: ignore[arg-type]
    result = grade(program.expected(), {}, answer)
    assert result.accuracy in (None, 0.0, 100.0)
    read_list(answer)
    read_number(answer)


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"[\[\]\(\)x0-9, .a-z=-]{0,80}", fullmatch=True), st.sampled_from(QUERIES))
def test_scorers_never_raise_on_bracket_soup(answer: str, query: str) -> None:
    program = generate(3, 6, 2, query)  # type: ignore[arg-type]
    assert grade(program.expected(), {}, answer).accuracy in (None, 0.0, 100.0)


def test_deep_nesting_is_not_a_crash() -> None:
    # Python's parser refuses this much nesting: every span tried fails, none is read.
    assert read_list("[" * 100_000 + "]" * 100_000) is None
    assert read_list("[" * 100_000 + "]" * 100_000 + " [4]") is None  # past MAX_SPANS
    assert grade([1], {}, "[" * 100_000).parse_ok is False
