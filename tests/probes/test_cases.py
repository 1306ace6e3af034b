"""The cases probe: case files, default keywords, keyword recall, depths, prompts, cells."""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.config._sweep import parse_config
from needlescope.errors import ConfigError
from needlescope.fitting._search import measure_text
from needlescope.grading import keywords as keyword_rules
from needlescope.haystack._fillers import PatternFiller, SyntheticProseFiller
from needlescope.probes.build import build_context
from needlescope.probes.cases import case_file
from needlescope.probes.cases import probe as cases

REPO = Path(__file__).resolve().parents[2]
EN_CASES = REPO / "configs" / "cases" / "en.yaml"
ZH_CASES = REPO / "configs" / "cases" / "zh.yaml"
PROSE_EN = SyntheticProseFiller("en", 0)
PROSE_ZH = SyntheticProseFiller("zh", 0)
SENTENCE_END = re.compile(r"[.?!。？！]$")

CAKE_KEYWORDS = [["Ground", "cardamom"], ["Toasted", "hazelnuts"], ["Elderflower", "syrup"]]
CAKE = {"keywords": CAKE_KEYWORDS}


def config(cases_file: Path = EN_CASES, **probe: Any) -> Any:
    return parse_config(
        {
            "name": "t",
            "seed": 3,
            "models": [
                {"name": "m1", "provider": "local"},
                {"name": "m2", "provider": "local"},
                {"name": "judge", "provider": "local", "under_test": False},
            ],
            "probes": [
                {"probe": "cases", "cases_file": str(cases_file), "lengths": [500], **probe}
            ],
        }
    )


def one_cell(case: str = "plum_cake_secrets", depth: float = 40.0, **probe: Any) -> Any:
    cfg = config(cases=[case], depths=[depth], **probe)
    return next(cases.expand(cfg, cfg.probes[0]))


# --- case files -------------------------------------------------------------------------------


def test_shipped_case_files_load() -> None:
    english = case_file.load_cases(EN_CASES)
    chinese = case_file.load_cases(ZH_CASES)
    assert set(english) == {"plum_cake_secrets", "veldmere_facts", "lighthouse_colour"}
    assert {c.language for c in english.values()} == {"en"}
    assert {c.language for c in chinese.values()} == {"zh"}
    cake = english["plum_cake_secrets"]
    assert [n.keywords for n in cake.needles] == [tuple(k) for k in CAKE_KEYWORDS]
    assert english["veldmere_facts"].needles[0].keywords == ("clockmaker", "Osric Hale")
    assert len(cake.sha256) == 16


def test_names_select_cases_in_order(tmp_path: Path) -> None:
    picked = case_file.load_cases(EN_CASES, ["lighthouse_colour", "plum_cake_secrets"])
    assert list(picked) == ["lighthouse_colour", "plum_cake_secrets"]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = 'good:\n  needles: ["The kettle is copper."]\n  question: "What is the kettle?"\n'
GOOD += '  true_answer: "Copper."\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2", "invalid YAML at line"),
        ("- just\n- a list\n", "expected a mapping of case names to cases"),
        ("broken: 3\n", "case 'broken': expected a mapping with needles"),
        ('x:\n  needles: []\n  question: "q?"\n  true_answer: "a"\n', "case 'x': needles must"),
        (
            'x:\n  needles: ["n one"]\n  true_answer: "a"\n',
            "case 'x': question: expected non-empty",
        ),
        ('x:\n  needles: ["n one"]\n  question: "q?"\n  true_answer: " "\n', "true_answer"),
        ('x:\n  needles: [3]\n  question: "q?"\n  true_answer: "a"\n', "needles.0: expected"),
        (
            'x:\n  needles: [{text: "n one", keys: [a]}]\n  question: "q?"\n  true_answer: "a"\n',
            "needles.0: unknown field 'keys'",
        ),
        (
            'x:\n  needles: [{text: "n one", keywords: []}]\n  question: "q?"\n  true_answer: a\n',
            "needles.0.keywords: expected a non-empty list",
        ),
        ('x:\n  needles: ["n"]\n  question: "q?"\n  answer: "a"\n', "unknown field 'answer'"),
        (
            'x:\n  needles: ["n one"]\n  question: "q?"\n  true_answer: "a"\n  language: fr\n',
            "language must be en or zh",
        ),
        ('x:\n  needles: ["!!"]\n  question: "q?"\n  true_answer: "a"\n', "no word to check"),
    ],
)
def test_bad_case_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        case_file.load_cases(path)
    error = str(caught.value)
    assert message in error
    assert str(path) in error and "\n" not in error


def test_unknown_case_name_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError, match=r"unknown case 'bad'; known: good"):
        case_file.load_cases(path, ["bad"])
    with pytest.raises(ConfigError, match="cases file not found"):
        case_file.load_cases(tmp_path / "missing.yaml")


def test_needle_text_is_kept_as_written_and_language_detected(tmp_path: Path) -> None:
    # U-NIAH's needles carry the spaces that join them to the haystack: kept, as written.
    path = write(tmp_path, GOOD.replace('"The kettle is copper."', '" The   kettle is copper. "'))
    case = case_file.load_cases(path)["good"]
    assert case.needles[0].text == " The   kettle is copper. "
    assert case.language == "en"
    assert case.needles[0].keywords == ("copper",)


# --- default keywords -------------------------------------------------------------------------


def test_default_keywords_drop_stopwords_shared_and_question_words() -> None:
    needles = [
        "The red door of the mill is guarded by Brannoc.",
        "The blue door of the mill is guarded by Ysolde, 7 of us.",
    ]
    question = "Who guards the doors of the mill?"
    # "door", "mill", "guarded" are in both needles; "the", "of", "is", "by" are stopwords;
    # "us" is short; "7" is a number, kept however short.
    assert case_file.default_keywords(needles, question) == [
        ("red", "Brannoc"),
        ("blue", "Ysolde", "7"),
    ]


def test_default_keywords_relax_when_nothing_is_left() -> None:
    # Every word is in the question: the question filter is dropped ("here" stays a stopword);
    # a needle of stopwords only keeps them all.
    assert case_file.default_keywords(["Mosses grow here."], "Do mosses grow here?") == [
        ("Mosses", "grow")
    ]
    assert case_file.default_keywords(["It is."], "") == [("It", "is")]


def test_default_keywords_in_chinese_use_two_character_pieces() -> None:
    needles = ["云栖村的第一件宝物是一面铜镜。", "云栖村的第二件宝物是一把桃木梳。"]
    question = "云栖村的宝物是什么？"
    assert case_file.default_keywords(needles, question) == [("面铜", "铜镜"), ("桃木", "木梳")]
    assert case_file.default_keywords(["茶名叫雪松白毫。"], "茶叫什么？") == [
        ("雪松", "松白", "白毫")
    ]


# --- keyword recall ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "reply", "found"),
    [
        ("cardamom", "It has CARDAMOM in it.", True),
        ("hazelnuts", "a toasted hazelnut", True),
        ("hazelnut", "toasted hazelnuts", True),
        ("fig", "the figure", False),
        ("fig", "figs, and more figs", True),
        ("glass", "a glas of water", False),
        ("Osric Hale", "founded by osric\nhale", True),
        ("Osric Hale", "Osric and Hale", False),
        ("42", "code 421", False),
        ("42", "code 42.", True),
        ("铜镜", "第一件是一面铜镜。", True),
        ("铜镜", "铜器", False),
        ("café", "CAFÉ", True),
        ("", "anything", False),
    ],
)
def test_keyword_found(keyword: str, reply: str, found: bool) -> None:
    assert keyword_rules.keyword_found(keyword, reply) is found


def test_grade_worked_example() -> None:
    reply = "The cake hides cardamom and elderflower syrup."
    grade = cases.grade(CAKE, {}, reply)
    assert grade.parse_ok and grade.parse_error is None
    # Recall per needle: 1/2, 0/2, 2/2 → mean 1/2.
    assert grade.accuracy == pytest.approx(50.0)
    assert [(n.needle_index, n.in_lcs, n.outcome) for n in grade.needles] == [
        (1, True, "correct"),
        (2, False, "missing"),
        (3, True, "correct"),
    ]
    assert grade.answered == [["cardamom"], [], ["Elderflower", "syrup"]]
    assert grade.figures == {"correct": 2, "missing": 1}
    assert [n["recall"] for n in grade.detail["needles"]] == [0.5, 0.0, 1.0]


def test_under_half_the_keywords_is_partial_not_recalled() -> None:
    grade = cases.grade({"keywords": [["deep", "cobalt", "blue"]]}, {}, "It is blue.")
    assert grade.accuracy == pytest.approx(100 / 3)
    assert (grade.needles[0].in_lcs, grade.needles[0].outcome) == (False, "partial")


def test_perfect_and_empty_answers() -> None:
    assert (
        cases.grade(CAKE, {}, "ground cardamom, toasted hazelnuts, elderflower syrup").accuracy
        == 100
    )
    empty = cases.grade(CAKE, {}, "")
    assert empty.parse_ok and empty.accuracy == 0
    assert [n.outcome for n in empty.needles] == ["missing"] * 3


def test_malformed_expected_is_a_parse_error_not_a_crash() -> None:
    grade = cases.grade({"needles": []}, {}, "anything")
    assert not grade.parse_ok and grade.accuracy is None


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(st.lists(st.text(min_size=1), min_size=1), min_size=1, max_size=4))
def test_grade_never_raises(reply: str, keywords: list[list[str]]) -> None:
    for expected in (CAKE, {"keywords": keywords}):
        grade = cases.grade(expected, {}, reply)
        assert grade.parse_ok
        assert grade.accuracy is not None and 0 <= grade.accuracy <= 100
        assert len(grade.needles) == len(expected["keywords"])


# --- depths -----------------------------------------------------------------------------------


def test_linear_and_sigmoid_depths() -> None:
    assert cases.depth_percents(5, "linear") == [0.0, 25.0, 50.0, 75.0, 100.0]
    assert cases.depth_percents(3) == [0.0, 50.0, 100.0]
    assert cases.depth_percents(1) == [50.0]
    # 100 / (1 + e^(-0.1 (x - 50))) at x = 25 and 75; the ends stay 0 and 100.
    assert cases.depth_percents(5, "sigmoid") == [0.0, 7.586, 50.0, 92.414, 100.0]


@pytest.mark.parametrize("count", [4, 7, 10, 15])
def test_sigmoid_depths_are_denser_at_the_ends(count: int) -> None:
    depths = cases.depth_percents(count, "sigmoid")
    gaps = [b - a for a, b in itertools.pairwise(depths)]
    first_half = gaps[: (len(gaps) + 1) // 2]
    assert depths[0] == 0 and depths[-1] == 100 and depths == sorted(depths)
    assert all(a < b for a, b in itertools.pairwise(first_half))
    assert gaps == pytest.approx(gaps[::-1], abs=2e-3)


def test_bad_depth_arguments() -> None:
    with pytest.raises(ValueError, match="positive"):
        cases.depth_percents(0)
    with pytest.raises(ValueError, match="linear or sigmoid"):
        cases.depth_percents(3, "cubic")  # type: ignore[arg-type]


def test_needles_after_the_first_are_spaced_evenly_to_the_end() -> None:
    assert cases.needle_depths(40, 3) == [40, 60, 80]
    assert cases.needle_depths(0, 4) == [0, 25, 50, 75]
    assert cases.needle_depths(100, 2) == [100, 100]
    assert cases.needle_depths(70, 1) == [70]


# --- cells ------------------------------------------------------------------------------------


def test_expand_crosses_tested_models_cases_lengths_depths_fillers_repeats() -> None:
    cfg = config(lengths=[300, 600], depth_count=3, fillers=["prose-en", "pattern"], repeats=2)
    cells = list(cases.expand(cfg, cfg.probes[0]))
    assert len(cells) == 2 * 3 * 2 * 3 * 2 * 2  # models × cases × lengths × depths × fillers × r
    assert {c.model for c in cells} == {"m1", "m2"}  # the judge-only model has no cells
    assert len({c.cell_id for c in cells}) == len(cells)
    cell = cells[0]
    assert (cell.probe, cell.placement, cell.prompt_version) == ("cases", "depth", "cases-en-v1")
    assert cell.depth == 0.0 and cell.needle_count == 3
    params = cell.params()
    assert params["case"] == "plum_cake_secrets" and params["answer_buffer"] == 200
    assert params["case_sha256"] == case_file.load_cases(EN_CASES)["plum_cake_secrets"].sha256
    assert [c.cell_id for c in cases.expand(cfg, cfg.probes[0])] == [c.cell_id for c in cells]
    # The context (needles and their places) does not depend on the model.
    assert len({c.context_id for c in cells}) == len(cells) // 2


def test_sigmoid_and_explicit_depths_reach_the_cells() -> None:
    cfg = config(cases=["lighthouse_colour"], depth_count=5, depth_spacing="sigmoid")
    assert [c.depth for c in cases.expand(cfg, cfg.probes[0])][:5] == [0, 7.586, 50, 92.414, 100]
    cfg = config(cases=["lighthouse_colour"], depths=[10, 10, 90])
    assert [c.depth for c in cases.expand(cfg, cfg.probes[0])][:2] == [10, 90]


def test_changed_case_text_changes_the_cell(tmp_path: Path) -> None:
    first = one_cell()
    text = EN_CASES.read_text(encoding="utf-8").replace("Ground cardamom", "Ground mace")
    other = write(tmp_path, text)
    cfg = config(other, cases=["plum_cake_secrets"], depths=[40.0])
    changed = next(cases.expand(cfg, cfg.probes[0]))
    assert changed.cell_id != first.cell_id


def test_answer_budget() -> None:
    cell = one_cell(answer_buffer=96)
    assert cases.answer_budget(cell, None) == 96
    assert cases.answer_budget(cell, 300) == 300


# --- prompts ----------------------------------------------------------------------------------


def filler_positions(inserted: Any) -> list[int]:
    """Where each needle went in the filler's own coordinates (what was inserted before it
    taken out)."""
    positions, added = [], 0
    for start, end in inserted.spans:
        positions.append(start - added)
        added += end - start
    return positions


def longest_sentence(text: str) -> int:
    return max(len(s) for s in re.split(r"(?<=[.?!。？！])\s*", text))


@pytest.mark.parametrize("depth", [0.0, 12.5, 40.0, 77.0, 100.0])
@pytest.mark.parametrize("case", ["plum_cake_secrets", "veldmere_facts"])
def test_needles_sit_at_their_depths_on_sentence_boundaries(depth: float, case: str) -> None:
    cell = one_cell(case, depth)
    n = 6000
    rendered = cases.render(cell, PROSE_EN, "prose", n)
    inserted = cases.haystack(cases.case_of(cell), depth, PROSE_EN, n)
    assert rendered.haystack_text == inserted.text and rendered.offsets == inserted.offsets
    filler_text = PROSE_EN.text(n)
    slack = longest_sentence(filler_text)
    targets = [d / 100 * n for d in cases.needle_depths(depth, 3)]
    positions = filler_positions(inserted)
    assert positions == sorted(positions)
    for position, target in zip(positions, targets, strict=True):
        assert abs(position - target) <= slack  # within a sentence of the depth asked for
        before = filler_text[:position].rstrip()
        assert position == 0 or SENTENCE_END.search(before)  # never inside a sentence
    for offset, needle in zip(rendered.offsets, rendered.expected["needles"], strict=True):
        assert rendered.haystack_text[offset : offset + len(needle)] == needle
        after = rendered.haystack_text[offset + len(needle) :]
        assert after == "" or after[0] in " \n"
    assert rendered.facts["depth"] == depth
    assert rendered.facts["needle_depths"] == pytest.approx(cases.needle_depths(depth, 3))
    assert rendered.facts["pair_id"] == cell.context_id


def test_chinese_needles_sit_after_chinese_sentence_ends() -> None:
    cfg = config(ZH_CASES, cases=["yunqi_treasures"], depths=[50.0])
    cell = next(cases.expand(cfg, cfg.probes[0]))
    assert cell.prompt_version == "cases-zh-v1"
    rendered = cases.render(cell, PROSE_ZH, "prose", 3000)
    for offset in rendered.offsets:
        assert rendered.haystack_text[offset - 1] in "。？！"
    assert "问题：云栖村的三件宝物分别是什么？" in rendered.prompt_text


def test_prompt_holds_the_haystack_then_the_question() -> None:
    rendered = cases.render(one_cell(), PROSE_EN, "prose", 2000)
    prompt = rendered.prompt_text
    assert rendered.haystack_text in prompt
    assert prompt.index(rendered.haystack_text) < prompt.index("Question: What are the secret")
    assert "based only on the document" in prompt
    assert rendered.expected["true_answer"].startswith("Ground cardamom")


@settings(max_examples=60, deadline=None)
@given(
    depth=st.floats(0, 100),
    n=st.integers(0, 4000),
    extra=st.integers(1, 500),
    filler=st.sampled_from([PROSE_EN, PROSE_ZH, PatternFiller()]),
)
def test_render_is_deterministic_and_prefix_stable(
    depth: float, n: int, extra: int, filler
) -> None:
    cell = one_cell("plum_cake_secrets", depth)
    kind = "pattern" if isinstance(filler, PatternFiller) else "prose"
    first = cases.render(cell, filler, kind, n)
    assert cases.render(cell, filler, kind, n) == first
    # Taking the needles (with the spaces added around them) out gives back the filler's prefix.
    inserted = cases.haystack(cases.case_of(cell), depth, filler, n)
    assert first.haystack_text == inserted.text
    text = inserted.text
    for start, end in reversed(inserted.spans):
        text = text[:start] + text[end:]
    assert text == filler.text(n)
    for offset, needle in zip(first.offsets, first.expected["needles"], strict=True):
        assert first.haystack_text[offset : offset + len(needle)] == needle
    assert filler.text(n + extra).startswith(filler.text(n))
    longer = cases.render(cell, filler, kind, n + extra)
    assert len(longer.prompt_text) >= len(first.prompt_text)


def test_fitting_to_a_length_with_the_sweeps_builder() -> None:
    cell = one_cell(length_unit="chars", lengths=[3000])

    async def measure(text: str) -> int:
        return measure_text(text, "chars")

    context = asyncio.run(build_context(cases, cell, PROSE_EN, "prose", measure))
    assert context.prompt_length == len(context.prompt_text) <= 3000
    assert len(cases.render(cell, PROSE_EN, "prose", context.filler_chars + 1).prompt_text) > 3000
    assert context.max_tokens == 200
