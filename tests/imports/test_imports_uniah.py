"""U-NIAH's result files (LLM and RAG runs) read as CaseAnswers, with the question from the
request logs beside them and a judge score of -1 kept as an unreadable judgment."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean

import pytest

from needlescope.imports import CaseAnswer, ImportFormatError, read_uniah
from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "imports" / "uniah"
RAG = FIXTURE / "rag_multi_needle"
EXPERIMENT = "Essays_soup_ingredients/soup_ingredients_topk5_norm_needles_3/demo-1_5-chat"
LLM_EXPERIMENT = "Essays_soup_ingredients/soup_ingredients_norm_needles_3/demo-1_5-chat"
QUESTION = "What are the secret ingredients needed to make the perfect winter soup?"


def cell_means(records: list[CaseAnswer]) -> dict[tuple[str, int, float], float | None]:
    """U-NIAH's figure per cell: the mean of the readable judgments (None: none readable)."""
    scores: dict[tuple[str, int, float], list[float]] = defaultdict(list)
    for r in records:
        scores[(r.mode, r.length, r.depth_percent)] += (
            [] if r.original_score is None else [r.original_score]
        )
    return {k: mean(v) if v else None for k, v in scores.items()}


def test_llm_and_rag_runs_and_their_cells() -> None:
    records = read_uniah(FIXTURE)
    assert [(r.mode, r.settings["experiment"]) for r in records] == [
        ("llm", LLM_EXPERIMENT),
        ("llm", LLM_EXPERIMENT),
        ("rag", EXPERIMENT),
        ("rag", EXPERIMENT),
        ("rag", EXPERIMENT),
    ]
    assert cell_means(records) == {
        ("llm", 1000, 10.0): 9,
        ("llm", 1000, 50.0): 3,
        ("rag", 1000, 10.0): 8,
        ("rag", 1000, 50.0): None,  # its one judgment was -1
        ("rag", 2000, 10.0): 5,
    }
    assert len({r.key for r in records}) == 5  # LLM and RAG cells of one length and depth differ


def test_a_judge_score_of_minus_one_is_no_score() -> None:
    unreadable = [r for r in read_uniah(RAG) if r.judge_unreadable]
    assert len(unreadable) == 1
    assert unreadable[0].original_score is None
    assert (unreadable[0].length, unreadable[0].depth_percent) == (1000, 50.0)


def test_the_question_and_rag_settings_come_from_the_request_log() -> None:
    first, unreadable, no_log = read_uniah(RAG)
    assert first.question == QUESTION and first.true_answer is None
    assert len(first.needles) == 3 and first.needles[0].startswith(" Smoked paprika")
    assert first.response == "Smoked paprika, roasted chestnuts and brown butter."
    # Two logs for this test: the one whose answer is the reply, not the later one.
    assert first.settings["detail_file"].endswith("_soup_ingredients_20250301_101500.jsonl")
    assert first.settings["context_mode"] == "topk" and first.settings["reverse"] is False
    assert (first.settings["chunk_size"], first.settings["chunk_overlap"]) == (600, 100)
    assert "top_k" not in first.settings  # null in the log
    assert first.model == "demo-1.5-chat" and first.repeat == 1
    assert first.answered_at == datetime(2025, 3, 1, 10, 15, 4, tzinfo=UTC)
    assert first.duration_s == 2.5
    assert first.key == ("uniah", EXPERIMENT, "demo-1.5-chat", 1000, 10.0, 1)
    assert unreadable.question == QUESTION
    assert no_log.question is None and no_log.mode == "rag"  # rag_multi_needle says so


@pytest.mark.parametrize(
    "start",
    [
        RAG / "results",
        RAG / "results" / EXPERIMENT,
        RAG / "results" / EXPERIMENT / "demo-1_5-chat_len_1000_depth_1000_results.json",
    ],
)
def test_any_path_in_the_tree_finds_the_logs(start: Path) -> None:
    record = read_uniah(start)[0]
    assert record.question == QUESTION
    assert record.settings["experiment"] == EXPERIMENT  # so the key does not depend on the path


def test_a_folder_without_results_keys_on_the_folders_below_it(tmp_path: Path) -> None:
    source = RAG / "results" / EXPERIMENT
    shutil.copytree(source, tmp_path / "copy" / "model")
    (record, *_) = read_uniah(tmp_path / "copy")
    assert record.settings == {"experiment": "model"}
    assert record.question is None and record.mode == "llm"


def write_result(folder: Path, **fields: object) -> Path:
    data = {
        "model": "m",
        "context_length": 1000,
        "depth_percent": 10.0,
        "version": 1,
        "needles": ["A needle."],
        "model_response": "A reply.",
        "score": 6,
        **fields,
    }
    path = folder / "results" / "exp" / "m" / "m_len_1000_depth_1000_results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_bad_request_log_fails_the_import(tmp_path: Path) -> None:
    write_result(tmp_path)
    log = tmp_path / "detail_results" / "exp" / "m" / "log_m_len_1000_depth_1000_x.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"question": "Q?", "answer": "A reply."}\n{"answer": "other"}\n')
    with pytest.raises(ImportFormatError) as error:
        read_uniah(tmp_path)
    assert str(error.value) == f'{log}: line 2: no field "question"'
    # A log of depth 10000 is not this test's (depth 1000).
    log.rename(log.with_name("log_m_len_1000_depth_10000_x.jsonl"))
    assert read_uniah(tmp_path)[0].question is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"score": "7"}, 'field "score" must be a number, not "7"'),
        ({"needles": "one"}, 'field "needles" must be a list of texts, not "one"'),
        ({"model_response": 3}, 'field "model_response" must be text, not 3'),
        ({"version": 0}, 'field "version" must be at least 1, not 0'),
        ({"depth_percent": 20.0}, "depth_percent is 20.0 but the file name says 1000 (× 100)"),
    ],
)
def test_a_bad_result_file_names_itself(tmp_path: Path, fields: dict, problem: str) -> None:
    path = write_result(tmp_path, **fields)
    with pytest.raises(ImportFormatError) as error:
        read_uniah(tmp_path)
    assert str(error.value) == f"{path}: {problem}"


def test_no_result_files(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(ImportFormatError, match="no U-NIAH result files in this folder"):
        read_uniah(tmp_path)
