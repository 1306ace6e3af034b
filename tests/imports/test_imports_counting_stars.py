"""Counting-Stars result files read as StarsAnswers, and the paper's per-length scores computed
from them with needlescope's grader (worked by hand on our own fixture)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.imports import ImportFormatError, read_counting_stars
from needlescope.imports.counting_stars import (
    grade_answer,
    paper_length,
    paper_overall,
    paper_scores,
    star_scores,
)
from needlescope.imports.records import Source, StarsAnswer
from needlescope.probes.counting_stars import probe as stars
from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "imports" / "counting_stars" / "results"
EN = FIXTURE / "EN_demo_4_3.txt"
ZH = FIXTURE / "ZH_demo_4_1.txt"


def line(**fields: object) -> dict[str, object]:
    return {
        "code": 0,
        "answer": '{"little_penguin": [1, 2]}',
        "model_name": "m",
        "sky_size": 100,
        "reference_counting_results": [1, 2],
        **fields,
    }


def write_lines(path: Path, *rows: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def test_every_line_is_one_answer() -> None:
    records = read_counting_stars(FIXTURE)
    assert [(Path(r.source.path).name, r.source.line) for r in records] == [
        ("EN_demo_4_3.txt", 1),
        ("EN_demo_4_3.txt", 2),
        ("EN_demo_4_3.txt", 3),
        ("EN_demo_4_3.txt", 4),
        ("ZH_demo_4_1.txt", 1),
    ]
    assert [(r.language, r.sky_size, r.repeat) for r in records] == [
        ("en", 1000, 1),
        ("en", 2000, 1),
        ("en", 2000, 2),  # a second line of the same sky size
        ("en", 3000, 1),
        ("zh", 1450, 1),
    ]
    first = records[0]
    assert first.model == "demo-stars-1" and first.counts == (2, 7, 11, 14)
    assert first.star_count == 4 and first.code == 0
    assert (first.prompt_tokens, first.completion_tokens) == (1012, 18)
    assert first.parameters["temperature"] == 0.0
    assert first.question is not None and first.question.startswith("\n\nPlease list")
    prompt = json.loads(EN.read_text(encoding="utf-8").split("\n")[0])["question"]
    assert first.prompt_chars == len(prompt) and first.prompt_sha256 is not None
    assert first.key == ("stars", "EN_demo_4_3.txt", 1)


def test_the_paper_s_per_length_scores_worked_by_hand() -> None:
    """Counts 2, 7, 11, 14 (M = 4). Size 1000: all four answered, 1.0. Size 2000, line 2:
    [2, 7, 7, 14, 11] truncated to M is [2, 7, 7, 14], so 11 is missed: stars 1, 1, 0, 1; line 3:
    [7, 14]: stars 0, 1, 0, 1. Per star the mean over both lines: 0.5, 1, 0, 1, whose mean is
    0.625. Size 3000: the counts in reverse order, membership: 1.0. Over the 12 (star, size)
    cells: (4 + 2.5 + 4) / 12 = 0.875."""
    english = read_counting_stars(EN)
    assert [star_scores(r) for r in english[1:3]] == [[1, 1, 0, 1], [0, 1, 0, 1]]
    assert paper_scores(english) == {1000: 1.0, 2000: 0.625, 3000: 1.0}
    assert paper_overall(english) == 0.875


def test_the_chinese_answer_and_its_label() -> None:
    (chinese,) = read_counting_stars(ZH)
    assert chinese.language == "zh"
    assert paper_scores([chinese]) == {1450: 0.75}  # {"小企鹅": [2, 7, 11]}: 14 missed
    assert paper_length(chinese.sky_size, chinese.language) == 2000  # 1450 / 0.725
    assert paper_length(1450, "en") == 1450


def notebook_scores(counts: list[int], answered: list[int]) -> list[int]:
    """The paper notebook's rule, written out: truncate to M, deduplicate, membership."""
    kept = set(answered[: len(counts)])
    return [1 if count in kept else 0 for count in counts]


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(1, 60), min_size=1, max_size=12),
    answered=st.lists(st.integers(0, 70), max_size=20),
    fenced=st.booleans(),
)
def test_the_grader_scores_each_star_as_the_notebook(
    counts: list[int], answered: list[int], fenced: bool
) -> None:
    reply = json.dumps({"little_penguin": answered})
    if fenced:
        reply = f"```json\n{reply}\n```"
    record = StarsAnswer(
        model="m",
        language="en",
        sky_size=10,
        counts=tuple(counts),
        response=reply,
        question=None,
        prompt_chars=None,
        prompt_sha256=None,
        prompt_tokens=None,
        completion_tokens=None,
        parameters={},
        code=0,
        repeat=1,
        source=Source("x"),
        key=("stars", "x", 1),
    )
    assert star_scores(record) == notebook_scores(counts, answered)


def reduce_duplicate(predicted: list[object], m: int) -> list[object]:
    """The notebook's ``reduce_duplicate``, as it is."""
    if len(predicted) > m:
        predicted = predicted[:m]
        predicted = list(set(predicted))
    else:
        predicted = list(set(predicted))
    return predicted


# JSON scalars a model may answer (a nested list or object makes the notebook's set() raise).
scalars = (
    st.integers(0, 12)
    | st.booleans()
    | st.sampled_from([0.0, 1.0, 6.0, 1.5])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet="016a", max_size=2)
    | st.none()
)


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=8),
    answered=st.lists(scalars, max_size=12),
)
def test_booleans_floats_and_strings_score_as_in_the_notebook(
    counts: list[int], answered: list[object]
) -> None:
    """The notebook's ``ref in reduce_duplicate(predicted, m)``: Python equality (true == 1)."""
    record = StarsAnswer(
        **{
            **read_counting_stars(EN)[0].__dict__,
            "counts": tuple(counts),
            "response": json.dumps({"little_penguin": answered}),
        }
    )
    kept = reduce_duplicate(answered, len(counts))
    assert star_scores(record) == [1 if ref in kept else 0 for ref in counts]


def test_an_imported_true_is_the_count_1_as_in_the_paper_s_code(tmp_path: Path) -> None:
    """The files come from the paper's code, where ``1 in [True, 6, 3, 20]`` holds: stars 1 and
    2 score, 50, where needlescope's own rule (a boolean is never a count) gives 25."""
    truth = [1, 6, 11, 14]
    path = write_lines(
        tmp_path / "EN_m_4_1.txt",
        line(answer='{"little_penguin": [true, 6, 3, 20]}', reference_counting_results=truth),
        line(
            answer='```json\n{"little_penguin": [1.0, true, 11]}\n```',
            reference_counting_results=truth,
            sky_size=200,
        ),
    )
    first, second = read_counting_stars(path)
    assert star_scores(first) == [1, 1, 0, 0]
    assert grade_answer(first).accuracy == 50.0
    assert grade_answer(first).answered == [True, 6, 3, 20]
    assert stars.grade(first.counts, {}, first.response).accuracy == 25.0  # needlescope's rule
    # 1.0 and true are one item ({1.0, True} is one in a Python set); 11 is in the window.
    assert star_scores(second) == [1, 0, 1, 0]
    assert grade_answer(second).detail["duplicates"] == 1
    assert paper_scores([first, second]) == {100: 0.5, 200: 0.5}
    assert paper_overall([first, second]) == 0.5


def test_needlescope_import_stores_the_paper_s_grade(tmp_path: Path) -> None:
    from needlescope.warehouse.store.tool_rows import stars_rows

    path = write_lines(
        tmp_path / "EN_m_4_1.txt",
        line(
            answer='{"little_penguin": [true, 6, 3, 20]}', reference_counting_results=[1, 6, 11, 14]
        ),
    )
    (record,) = read_counting_stars(path)
    imported = stars_rows("counting-stars", "m", record)
    assert imported.answer["accuracy"] == grade_answer(record).accuracy == 50.0


def test_a_reply_without_a_list_scores_zero() -> None:
    record = read_counting_stars(EN)[0]
    silent = StarsAnswer(**{**record.__dict__, "response": "I could not see any stars."})
    assert star_scores(silent) == [0, 0, 0, 0]  # the notebook stops here; the grader scores 0


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (line(reference_counting_results=[]), "is empty: no star to count"),
        (line(reference_counting_results=[1, "2"]), "must be a list of whole numbers"),
        (line(sky_size="4000"), 'field "sky_size" must be a whole number, not "4000"'),
        (line(answer=None), 'field "answer" is null'),
        (line(parameters=[1]), 'field "parameters" must be an object, not list'),
        ('{"answer": "x",', "not JSON (Expecting"),
        ("[1, 2]", "expected a JSON object, found a list"),
    ],
)
def test_a_bad_line_names_its_file_and_line(tmp_path: Path, row: object, problem: str) -> None:
    path = write_lines(tmp_path / "r.txt", line(), row)
    with pytest.raises(ImportFormatError) as error:
        read_counting_stars(tmp_path)
    assert str(error.value).startswith(f"{path}: line 2: ")
    assert problem in str(error.value)


def test_blank_lines_are_skipped_and_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.txt", "", line(), "   ")
    assert [r.source.line for r in read_counting_stars(path)] == [2]
    empty = write_lines(tmp_path / "e.txt", "")
    with pytest.raises(ImportFormatError, match=r"e\.txt: no result lines$"):
        read_counting_stars(empty)


def test_two_files_of_one_name_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(EN, tmp_path / folder / EN.name)
    with pytest.raises(ImportFormatError) as error:
        read_counting_stars(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'b' / EN.name}: a second result file named {EN.name!r}"
        f" (also {tmp_path / 'a' / EN.name})"
    )
