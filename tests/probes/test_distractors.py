"""Distractors: the shipped case file, keywords, depths, placement, and which one an answer
repeated."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import ConfigError
from needlescope.haystack._fillers import SyntheticProseFiller
from needlescope.probes.cases.case_file import parse_cases
from needlescope.probes.cases.distractors import (
    DISTRACTOR_KEYS,
    Distractor,
    Distractors,
    distractor_hit,
    load_distractors,
    parse_distractors,
    place,
    spread_depths,
)
from needlescope.probes.cases.probe import needle_depths

SHIPPED = Path(__file__).resolve().parents[2] / "configs/cases/distractors.yaml"
NEEDLES = [
    "Smoked paprika is one of the secret ingredients of Captain Morrow's fish stew.",
    "Pickled samphire is one of the secret ingredients of Captain Morrow's fish stew.",
]
QUESTION = "What are the secret ingredients of Captain Morrow's fish stew?"
TRUE_ANSWER = "Smoked paprika and pickled samphire."


def parse(body: dict[str, object]) -> Distractors | None:
    return parse_distractors(
        body, "f.yaml: case 'c'", needles=NEEDLES, question=QUESTION, true_answer=TRUE_ANSWER
    )


# --- the shipped case -------------------------------------------------------------------------


def test_shipped_case_has_three_needles_and_four_distractors() -> None:
    data = yaml.safe_load(SHIPPED.read_text("utf-8"))
    (name,) = data
    found = load_distractors(SHIPPED)[name]
    assert len(data[name]["needles"]) == 3 and len(found.items) == 4
    # Without its distractor keys it is an ordinary case that the cases probe reads.
    plain = {k: v for k, v in data[name].items() if k not in DISTRACTOR_KEYS}
    case = parse_cases({name: plain}, str(SHIPPED))[name]
    for index, item in enumerate(found.items, start=1):
        hit = distractor_hit(item.text, [d.keywords for d in found.items])
        assert hit.distractor == index  # each distractor is told from the others
        assert distractor_hit(case.true_answer, [item.keywords]).distractor is None
        for needle in case.needles:
            assert distractor_hit(needle.text, [item.keywords]).distractor is None


def test_shipped_case_default_keywords() -> None:
    found = next(iter(load_distractors(SHIPPED).values()))
    assert found.items[0].keywords == ("fennel seed",)
    assert found.items[3].keywords == ("Wild", "sorrel", "sister")


# --- which distractor an answer repeated ------------------------------------------------------

KEYWORDS = [["fennel seed"], ["juniper"], ["sesame"], ["Wild", "sorrel", "sister"]]


@pytest.mark.parametrize(
    ("answer", "distractor", "matched"),
    [
        ("Smoked paprika, pickled samphire and bitter orange peel.", None, ()),
        ("Dried juniper.", 2, (2,)),
        ("Fennel seeds and juniper", 1, (1, 2)),  # equal shares: the earliest
        ("wild sorrel", 4, (4,)),  # two of three keywords
        ("sorrel", None, ()),  # one of three is under half
        ("sesame and wild sorrel from his sister", 3, (3, 4)),
    ],
)
def test_distractor_hit(answer: str, distractor: int | None, matched: tuple[int, ...]) -> None:
    hit = distractor_hit(answer, KEYWORDS)
    assert (hit.distractor, hit.matched) == (distractor, matched)
    assert len(hit.shares) == 4


def test_best_share_wins_over_order() -> None:
    hit = distractor_hit(
        "juniper, wild sorrel for his sister", [["sorrel", "juniper"], KEYWORDS[3]]
    )
    assert hit.shares == (1.0, 1.0) and hit.distractor == 1
    hit = distractor_hit("wild sorrel for his sister", [["sorrel", "cumin"], KEYWORDS[3]])
    assert hit.matched == (1, 2) and hit.distractor == 2


def test_niah_distractor_values_read_the_same_way() -> None:
    values = [["4812"], ["9031"], ["7777"]]
    assert distractor_hit("The special magic number is 9031.", values).distractor == 2
    assert distractor_hit("It is 90311.", values).distractor is None
    assert distractor_hit("", values).matched == ()


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(st.lists(st.text(min_size=1), max_size=3), max_size=4))
def test_distractor_hit_never_raises(answer: str, keywords: list[list[str]]) -> None:
    hit = distractor_hit(answer, keywords)
    assert hit.distractor is None or hit.distractor in hit.matched
    assert all(0 <= s <= 1 for s in hit.shares)


# --- depths and placement ---------------------------------------------------------------------


def test_spread_depths_worked_example() -> None:
    # Seven slots at the middles of sevenths; the needles (50, 66.7, 83.3) take 50, 64.3 and
    # 78.6, the distractors the rest.
    assert spread_depths([50, 200 / 3, 250 / 3], 4) == [7.142857, 21.428571, 35.714286, 92.857143]
    # Needles at 0, 33.3 and 66.7 take 7.1, 35.7 and 64.3.
    assert spread_depths(needle_depths(0, 3), 4) == [21.428571, 50.0, 78.571429, 92.857143]
    assert spread_depths([50], 0) == []
    assert spread_depths([], 2) == [25.0, 75.0]


@given(st.lists(st.floats(0, 100), max_size=6), st.integers(0, 6))
def test_spread_depths_are_distinct_slots_of_the_grid(needles: list[float], count: int) -> None:
    depths = spread_depths(needles, count)
    assert len(depths) == count and depths == sorted(depths)
    total = len(needles) + count
    slots = [round(d * total / 100 - 0.5, 4) for d in depths]  # slot i sits at (i + ½) / total
    assert all(s == int(s) and 0 <= s < total for s in slots)
    assert len(set(slots)) == count


def test_given_depths_are_kept() -> None:
    given_depths = Distractors((Distractor("a b", ("a",)),), depths=(12.5,))
    assert given_depths.depths_for([50]) == [12.5]
    # Slots 25 and 75 are equally near the needle at 50: it takes the earlier.
    assert Distractors((Distractor("a b", ("a",)),)).depths_for([50]) == [75.0]


def test_place_puts_each_statement_at_its_depth() -> None:
    text = SyntheticProseFiller().text(20_000)
    distractors = ["Dried juniper is a secret.", "Toasted sesame was a secret."]
    placed = place(text, NEEDLES, [50.0, 75.0], distractors, [10.0, 75.0])
    for needle, offset in zip(NEEDLES, placed.needle_offsets, strict=True):
        assert placed.text[offset:].startswith(needle)
    for distractor, offset in zip(distractors, placed.distractor_offsets, strict=True):
        assert placed.text[offset:].startswith(distractor)
    size = len(placed.text)
    assert abs(placed.distractor_offsets[0] / size - 0.1) < 0.02
    assert abs(placed.needle_offsets[0] / size - 0.5) < 0.02
    assert placed.needle_offsets[1] < placed.distractor_offsets[1]  # same depth: needle first


def test_content_round_trips_through_params() -> None:
    found = parse({"distractors": ["Dried juniper is in Admiral Morrow's stew."]})
    assert found is not None
    assert Distractors.from_params(found.content()) == found
    assert Distractors.from_params({}) is None
    with_depths = parse({"distractors": ["Dried juniper is here."], "distractor_depths": [30]})
    assert with_depths is not None and with_depths.content()["distractor_depths"] == [30.0]
    assert Distractors.from_params(with_depths.content()) == with_depths


# --- reading a case's distractors -------------------------------------------------------------


def test_default_keywords_are_the_distractors_own_words() -> None:
    found = parse(
        {
            "distractors": [
                "Dried juniper is one of the secret ingredients of Admiral Morrow's fish stew.",
                "Dried sage is one of the secret ingredients of Admiral Morrow's fish stew.",
            ]
        }
    )
    assert found is not None
    # "dried" and "admiral" are in both distractors: kept only while they tell them apart.
    assert [d.keywords for d in found.items] == [("juniper",), ("sage",)]


def test_shared_words_come_back_when_nothing_else_is_left() -> None:
    found = parse({"distractors": ["Admiral Morrow's stew.", "Admiral Morrow's stew, again."]})
    assert found is not None
    assert found.items[0].keywords == ("Admiral",)


def test_no_distractors_is_none() -> None:
    assert parse({"needles": NEEDLES}) is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"distractors": []}, "f.yaml: case 'c': distractors must be a non-empty list"),
        ({"distractors": "one"}, "f.yaml: case 'c': distractors must be a non-empty list"),
        ({"distractors": [""]}, "f.yaml: case 'c': distractors.0: expected non-empty text"),
        ({"distractors": [{"text": "a b", "why": 1}]}, "distractors.0: unknown field 'why'"),
        ({"distractors": [{"text": "a b", "keywords": []}]}, "distractors.0.keywords: expected"),
        (
            {"distractors": ["Smoked paprika, pickled samphire."]},
            "distractors.0: no word of its own",
        ),
        (
            {"distractors": [{"text": "Smoked cumin.", "keywords": ["smoked"]}]},
            "distractors.0.keywords.0: 'smoked' is in the true answer",
        ),
        (
            {"distractors": ["Dried juniper."], "distractor_depths": [10, 20]},
            "f.yaml: case 'c': distractor_depths: expected a list of 1 depth percents",
        ),
        (
            {"distractors": ["Dried juniper."], "distractor_depths": [120]},
            "f.yaml: case 'c': distractor_depths.0: expected a depth percent from 0 to 100",
        ),
        (
            {"distractors": ["Dried juniper."], "distractor_depths": [True]},
            "distractor_depths.0: expected a depth percent",
        ),
        ({"distractor_depths": [10]}, "distractor_depths given without distractors"),
    ],
)
def test_bad_distractors_name_the_file_and_field(body: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        parse(body)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_load_distractors_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    with pytest.raises(ConfigError, match="cases file not found"):
        load_distractors(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not a readable YAML file"):
        load_distractors(bad)
    odd = tmp_path / "odd.yaml"
    odd.write_text(
        "c:\n  needles: [A fox.]\n  question: Q?\n  true_answer: A fox.\n"
        "  distractors: [{text: 'A hen.', keywords: [fox]}]\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"odd.yaml: case 'c': distractors\.0\.keywords\.0"):
        load_distractors(odd)
