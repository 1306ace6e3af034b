"""gkamradt/LLMTest_NeedleInAHaystack's results read as CaseAnswers: the real Claude 2.1 and
GPT-4 files in ../shared, our own files in the tool's current layout, and bad files."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean

import pytest

from needlescope.imports import ImportFormatError, read_gkamradt
from needlescope.imports.gkamradt import DEFAULT_QUESTION
from tests.conftest import REPO, SHARED

PEERS = SHARED / "data" / "peer-results"
CLAUDE = PEERS / "gkamradt-claude-2.1"
GPT4 = PEERS / "gkamradt-gpt-4" / "OpenAI_OriginalResults.json"
FIXTURE = REPO / "tests" / "fixtures" / "imports" / "gkamradt"
NEEDLE = (
    "The best thing to do in San Francisco is eat a sandwich"
    " and sit in Dolores Park on a sunny day."
)

needs_peers = pytest.mark.skipif(not PEERS.is_dir(), reason="../shared/data/peer-results absent")


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def one_test(**fields: object) -> dict[str, object]:
    return {
        "model": "m",
        "context_length": 1000,
        "depth_percent": 50.0,
        "version": 1,
        "needle": "The kettle is blue.",
        "model_response": "Blue.",
        "score": 10,
        **fields,
    }


@needs_peers
def test_every_claude_file_is_one_answer_and_the_cell_means_are_the_files() -> None:
    records = read_gkamradt(CLAUDE)
    files = sorted(CLAUDE.glob("*.json"))
    assert len(records) == len(files) == 20
    assert [Path(r.source.path).name for r in records] == [f.name for f in files]
    # The files' own figure, computed here from the raw JSON: mean score per (length, depth).
    raw: dict[tuple[int, float], list[float]] = defaultdict(list)
    for file in files:
        data = json.loads(file.read_text(encoding="utf-8"))
        raw[(data["context_length"], data["depth_percent"])].append(data["score"])
    ours: dict[tuple[int, float], list[float]] = defaultdict(list)
    for record in records:
        assert record.original_score is not None
        ours[(record.length, record.depth_percent)].append(record.original_score)
    assert {k: mean(v) for k, v in ours.items()} == {k: mean(v) for k, v in raw.items()}
    assert sorted(r.original_score for r in records).count(1) == 4  # the four misses


@needs_peers
def test_claude_files_carry_the_tool_s_fields() -> None:
    by_name = {Path(r.source.path).name: r for r in read_gkamradt(CLAUDE)}
    second = by_name["token_len_12706_depth_6429_results_2.json"]
    assert (second.model, second.length, second.depth_percent) == ("claude-2.1", 12706, 64.296)
    assert second.repeat == 2 and second.original_score == 10
    assert second.key == ("test", "claude-2.1", 12706, 64.296, 2)
    first = by_name["token_len_1000_depth_0_results.json"]
    assert first.repeat == 1 and first.depth_percent == 0.0
    assert first.needles == (f"\n    {NEEDLE}\n    ",)
    assert first.true_answer == NEEDLE  # the tool's judge compares the reply with the needle
    assert first.question == DEFAULT_QUESTION
    assert first.response is not None and first.response.startswith(" Based on the context")
    assert first.answered_at is None and first.duration_s is None  # older files have neither
    assert first.mode == "llm" and not first.judge_unreadable and not first.score_only
    miss = by_name["token_len_30265_depth_8868_results.json"]
    assert miss.original_score == 1 and miss.depth_percent == 88.684


@needs_peers
def test_the_gpt4_list_file_is_score_only_and_its_cells_are_the_file_s() -> None:
    records = read_gkamradt(GPT4)
    entries = json.loads(GPT4.read_text(encoding="utf-8"))
    assert len(records) == len(entries) == 225
    assert all(r.score_only and r.model is None and r.needles == () for r in records)
    assert {(r.length, r.depth_percent): r.original_score for r in records} == {
        (e["token_limit"], float(e["depth_percent"])): e["score"] for e in entries
    }
    assert len({r.length for r in records}) == len({r.depth_percent for r in records}) == 15
    assert records[17].source.entry == 17 and str(records[17].source).endswith(": entry 17")


@needs_peers
def test_a_second_list_file_is_a_second_run(tmp_path: Path) -> None:
    shutil.copy(GPT4, tmp_path / "OpenAI_OriginalResults.json")
    shutil.copy(GPT4, tmp_path / "OpenAI_OriginalResults_2.json")
    records = read_gkamradt(tmp_path)
    assert len(records) == 450
    assert sorted({r.repeat for r in records}) == [1, 2]


@needs_peers
def test_the_whole_peer_folder_reads_both_layouts() -> None:
    records = read_gkamradt(PEERS)  # its README.md is not a result file
    assert len(records) == 245
    assert sum(r.score_only for r in records) == 225


def test_the_tool_s_current_layout() -> None:
    records = read_gkamradt(FIXTURE / "results", question="Where is it quietest?")
    assert [(r.length, r.depth_percent, r.repeat, r.original_score) for r in records] == [
        (2000, 0.0, 1, 10),
        (2000, 50.0, 1, 1),
        (4000, 50.0, 2, 7),  # version 2: the tool's results_version
    ]
    first = records[0]
    assert first.model == "demo-1.5-chat" and first.question == "Where is it quietest?"
    assert first.answered_at == datetime(2024, 5, 2, 9, 15, 30, tzinfo=UTC)
    assert first.duration_s == 3.25
    assert first.settings == {"file_name": "demo-1_5-chat_len_2000_depth_0", "version": 1}


def test_the_file_name_fills_in_and_checks_length_and_depth(tmp_path: Path) -> None:
    data = one_test()
    del data["context_length"], data["depth_percent"], data["version"]
    write(tmp_path / "a" / "m_len_3000_depth_2500_results_2.json", data)
    (record,) = read_gkamradt(tmp_path / "a")
    assert (record.length, record.depth_percent, record.repeat) == (3000, 25.0, 2)
    bad = write(tmp_path / "b" / "m_len_3000_depth_2500_results.json", one_test())
    with pytest.raises(ImportFormatError) as error:
        read_gkamradt(bad)
    assert str(error.value) == f"{bad}: context_length is 1000 but the file name says 3000"
    off = write(tmp_path / "c" / "m_len_1000_depth_6429_results.json", one_test(depth_percent=62.0))
    with pytest.raises(ImportFormatError) as error:
        read_gkamradt(off)
    assert str(error.value) == f"{off}: depth_percent is 62.0 but the file name says 6429 (× 100)"


def test_one_test_twice_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "run1" / "m_len_1000_depth_5000_results.json", one_test())
    second = write(tmp_path / "run2" / "m_len_1000_depth_5000_results.json", one_test())
    with pytest.raises(ImportFormatError) as error:
        read_gkamradt(tmp_path)
    message = str(error.value)
    assert message.startswith(f"{second}: the same test as {tmp_path / 'run1'}")
    assert "(length 1000, depth 50%, run 1)" in message


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (one_test(score="ten"), 'field "score" must be a number, not "ten"'),
        (one_test(score=True), 'field "score" must be a number, not true'),
        (one_test(depth_percent=140), "depth_percent must be between 0 and 100, not 140"),
        (one_test(context_length=0), 'field "context_length" must be at least 1, not 0'),
        (one_test(model_response=None), 'field "model_response" is null'),
        (one_test(needle=[1]), 'field "needle" must be a list of texts, not list'),
        (one_test(test_timestamp_utc="yesterday"), 'field "test_timestamp_utc" must be a date'),
        (one_test(test_timestamp_utc="2024-01-01 10:00:00"), "with its UTC offset"),
        (one_test(test_duration_seconds=-2), "must not be negative"),
        (3, "expected a JSON object (one test) or a list, found 3"),
        ([], "an empty list: no results"),
        ([{"token_limit": 10, "depth_percent": 5}], 'entry 0: no field "score"'),
    ],
)
def test_a_bad_file_names_itself_and_the_field(tmp_path: Path, data: object, problem: str) -> None:
    path = write(tmp_path / "results.json", data)
    with pytest.raises(ImportFormatError) as error:
        read_gkamradt(tmp_path)
    assert str(error.value).startswith(f"{path}: ")
    assert problem in str(error.value)
    assert "\n" not in str(error.value)


def test_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="no gkamradt result files"):
        read_gkamradt(tmp_path)
    with pytest.raises(ImportFormatError, match="no such file or folder"):
        read_gkamradt(tmp_path / "missing")
    broken = tmp_path / "x_results.json"
    broken.write_bytes(b'{"model": "m",')
    with pytest.raises(ImportFormatError) as error:
        read_gkamradt(broken)
    assert str(error.value).startswith(f"{broken}: not JSON (")
    broken.write_bytes(b'{"model": "\xff"}')
    with pytest.raises(ImportFormatError, match=r": not UTF-8 text \(byte 11\)$"):
        read_gkamradt(broken)
