"""RULER prediction files read as RulerAnswers, scored as RULER's evaluate.py scores them: the
fixture's summary.csv holds figures worked out by hand, and the readers reproduce them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from needlescope.imports import ImportFormatError, read_ruler
from needlescope.imports.ruler import (
    is_null,
    metric_of,
    read_summary,
    score,
    task_nulls,
    task_scores,
)
from needlescope.probes.ruler.scoring import string_match_all
from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "imports" / "ruler" / "demo-model" / "synthetic"
PRED_4K = FIXTURE / "4096" / "pred"


def sample(index: int = 0, **fields: object) -> dict[str, object]:
    return {
        "index": index,
        "pred": "42",
        "input": "What is the number? Answer:",
        "outputs": ["42"],
        "others": {},
        "truncation": -1,
        "length": 30,
        **fields,
    }


def write_lines(path: Path, *rows: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_prediction_folders_and_their_samples() -> None:
    records = read_ruler(FIXTURE)  # 4096/data/ holds RULER's inputs, not predictions
    assert [(r.folder, r.task, r.index) for r in records][:5] == [
        ("4096", "niah_multivalue", 0),
        ("4096", "niah_multivalue", 1),
        ("4096", "niah_multivalue", 2),
        ("4096", "niah_single_1", 0),
        ("4096", "niah_single_1", 1),
    ]
    assert len(records) == 15
    assert {r.max_seq_length for r in records} == {4096, 8192}
    qa = [r for r in records if r.task == "qa_1"]
    assert [r.sample_id for r in qa] == ["q-17", "q-18", "q-19"]  # others.id, RULER's rule
    assert all(r.metric == "string_match_part" for r in qa)
    first = records[3]
    assert first.metric == "string_match_all" and first.sample_id == 0
    assert first.references == ("4818223",) and first.length == 120
    assert first.truncation is None  # -1: not counted
    assert first.prediction == " The special number for amber-otter is 4818223.\n"  # raw
    assert first.input_chars > 0 and len(first.input_sha256) == 64
    assert first.key == ("ruler", "4096", "niah_single_1", 0)


def test_task_scores_reproduce_summary_csv() -> None:
    """By hand, 4096: niah_single_1: found, wrong digits, empty (a null), found before a control
    character: 2/4 = 50.0. niah_multivalue: 3/4, 4/4, 1/4 of the values: 2/3 = 66.67. vt:
    all five names in lower case, then two of five: (1 + 0.4) / 2 = 70.0. qa_1 (any reference):
    "keeper", "marrow bay", 1894 for 1893: 2/3 = 66.67. 8192: one of three, one null: 33.33."""
    records = read_ruler(FIXTURE)
    scores, nulls = task_scores(records), task_nulls(records)
    for folder, summary in (("4096", "summary.csv"), ("8192", "summary-niah_single_1.csv")):
        expected = read_summary(FIXTURE / folder / "pred" / summary)
        assert {t: (scores[(f, t)], nulls[(f, t)]) for f, t in scores if f == folder} == expected
    assert list(scores) == [  # RULER's task order, length by length
        ("4096", "niah_single_1"),
        ("4096", "niah_multivalue"),
        ("4096", "vt"),
        ("4096", "qa_1"),
        ("8192", "niah_single_1"),
    ]


def test_qa_is_scored_on_any_reference() -> None:
    qa = read_ruler(PRED_4K / "qa_1.jsonl")
    assert [score(r) for r in qa] == [100.0, 100.0, 0.0]
    # Under string_match_all the first answer would find one reference of two: 50.0 overall.
    assert string_match_all([r.prediction for r in qa], [r.references for r in qa]) == 50.0


def test_post_processing_and_nulls() -> None:
    niah = read_ruler(PRED_4K / "niah_single_1.jsonl")
    assert [is_null(r) for r in niah] == [False, False, True, False]
    assert niah[2].prediction == "\x00\x1f \t"  # control characters and spaces only
    assert [score(r) for r in niah] == [100.0, 0.0, 0.0, 100.0]


@pytest.mark.parametrize("path", [PRED_4K, FIXTURE / "4096", PRED_4K / "vt.jsonl"])
def test_a_pred_folder_or_file_keeps_its_length(path: Path) -> None:
    assert {r.max_seq_length for r in read_ruler(path)} == {4096}


def test_chunk_files_count_as_their_task_and_an_unnamed_folder_keys_on_its_path(
    tmp_path: Path,
) -> None:
    write_lines(tmp_path / "run" / "pred" / "niah_single_2-0.jsonl", sample(0))
    write_lines(tmp_path / "run" / "pred" / "niah_single_2-1.jsonl", sample(1))
    records = read_ruler(tmp_path)
    assert [(r.task, r.index, r.max_seq_length, r.folder) for r in records] == [
        ("niah_single_2", 0, None, "run/pred"),
        ("niah_single_2", 1, None, "run/pred"),
    ]


def test_task_names_and_metrics(tmp_path: Path) -> None:
    assert metric_of("niah_single_4") == "string_match_all"  # a variant of RULER's
    assert metric_of("qa_3") == "string_match_part"
    assert metric_of("qaiah_single") is None  # another metric altogether
    path = write_lines(tmp_path / "pred" / "my_task.jsonl", sample())
    with pytest.raises(ImportFormatError) as error:
        read_ruler(tmp_path)
    assert str(error.value).startswith(f"{path}: no metric known for task 'my_task': RULER's")
    (record,) = read_ruler(tmp_path, metrics={"my_task": "string_match_part"})
    assert record.metric == "string_match_part"


def test_one_sample_twice_is_refused(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "4096" / "pred" / "vt.jsonl", sample(3), sample(3))
    with pytest.raises(ImportFormatError) as error:
        read_ruler(tmp_path)
    assert str(error.value) == f"{path}: line 2: the same sample (3) as {path}: line 1"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (sample(outputs=[]), 'field "outputs" is empty'),
        (sample(outputs=None), 'field "outputs" is null'),
        (sample(outputs=["a", None]), 'field "outputs" must be a list of texts'),
        (sample(pred=None), 'field "pred" is null'),
        (sample(pred=["x"]), 'field "pred" must be text, not list'),
        (sample(index="7"), 'field "index" must be a whole number, not "7"'),
        (sample(others={"id": [1]}), 'field "others.id" must be text or a whole number'),
        ('{"index": 1, "pred": "x"', "not JSON (Expecting"),
    ],
)
def test_a_bad_line_names_its_file_and_line(tmp_path: Path, row: object, problem: str) -> None:
    path = write_lines(tmp_path / "pred" / "niah_single_1.jsonl", sample(), row)
    with pytest.raises(ImportFormatError) as error:
        read_ruler(tmp_path)
    assert str(error.value).startswith(f"{path}: line 2: ")
    assert problem in str(error.value)


def test_a_lone_output_is_a_list_of_one(tmp_path: Path) -> None:
    row = sample()
    del row["outputs"]
    write_lines(tmp_path / "pred" / "vt.jsonl", {**row, "output": "42"})
    assert read_ruler(tmp_path)[0].references == ("42",)


def test_folders_without_predictions(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / "4096" / "data", tmp_path / "data")
    with pytest.raises(ImportFormatError, match="no RULER prediction files"):
        read_ruler(tmp_path)


def test_summary_csv_errors(tmp_path: Path) -> None:
    bad = tmp_path / "summary.csv"
    bad.write_text("0,1\nTasks,vt\nScore,high\nNulls,0/1\n")
    with pytest.raises(ImportFormatError, match="a score that is not a number"):
        read_summary(bad)
    bad.write_text("0,1\nTasks,vt\n")
    with pytest.raises(ImportFormatError, match=r"no Score row: not a RULER summary\.csv$"):
        read_summary(bad)
