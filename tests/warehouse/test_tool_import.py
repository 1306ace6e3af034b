"""``needlescope import TOOL PATH --model NAME``: other tools' results in the warehouse's own
tables, read back with SQL. Each tool's per-cell figure is computed from its files (or, for
RULER, read from its summary.csv) and compared with a query on the warehouse."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from typer.testing import CliRunner

from needlescope.flows.cli._app import app
from needlescope.imports import read_counting_stars
from needlescope.imports.counting_stars import paper_scores
from needlescope.imports.ruler import read_summary
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.tool_import import import_tool, tool_epoch
from tests.conftest import REPO, SHARED

PEERS = SHARED / "data" / "peer-results"
CLAUDE = PEERS / "gkamradt-claude-2.1"
GPT4 = PEERS / "gkamradt-gpt-4" / "OpenAI_OriginalResults.json"
FIXTURES = REPO / "tests" / "fixtures" / "imports"
needs_peers = pytest.mark.skipif(not PEERS.is_dir(), reason="../shared/data/peer-results absent")


def sql(store: Warehouse, query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = store.connect()
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@needs_peers
def test_every_claude_file_is_one_answer_and_the_cell_means_are_the_files(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh")
    files = sorted(CLAUDE.glob("*.json"))
    result = invoke(
        "import", "gkamradt", str(CLAUDE), "--model", "claude-2.1", "-w", str(store.root)
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["epoch"] == "legacy-gkamradt-claude-2.1"
    assert summary["answers_imported"] == len(files) == 20
    # The files' own figure: mean score per length × depth (a _2 file is a repeat of its cell).
    cells: dict[tuple[int, float], list[float]] = defaultdict(list)
    for file in files:
        data = json.loads(file.read_text())
        cells[(data["context_length"], round(data["depth_percent"], 6))].append(data["score"])
    rows = sql(
        store,
        "SELECT length, round(depth, 6), count(*), avg(original_score), avg(judge_score) "
        "FROM results WHERE epoch = ? GROUP BY ALL",
        [summary["epoch"]],
    )
    assert {(n, d): (k, s) for n, d, k, s, _ in rows} == {
        key: (len(v), mean(v)) for key, v in cells.items()
    }
    assert all(s == j for *_, s, j in rows)  # the judge's score is also the cases views' judge
    # needlescope's keyword grade beside it, and the cases views see both.
    graded = sql(
        store,
        "SELECT count(*), count(keyword_accuracy), count(judge_score),"
        " count(*) FILTER (WHERE disagreement) FROM cases_scores WHERE epoch = ?",
        [summary["epoch"]],
    )[0]
    assert graded[:3] == (20, 20, 20)
    answered = sql(
        store,
        "SELECT keyword_accuracy, judge_score FROM cases_scores WHERE epoch = ?",
        [summary["epoch"]],
    )
    assert graded[3] == sum((k >= 50) != (j >= 7) for k, j in answered)
    heat = sql(
        store,
        "SELECT length, round(depth, 6), mean_judge_score FROM cases_depth_length"
        " WHERE model = 'claude-2.1'",
    )
    assert {(n, d): s for n, d, s in heat} == {key: mean(v) for key, v in cells.items()}


@needs_peers
def test_the_import_is_idempotent_and_the_list_file_is_score_only(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh")
    first = import_tool("gkamradt", CLAUDE, "claude-2.1", store)
    again = import_tool("gkamradt", CLAUDE, "claude-2.1", store)
    assert (first["answers_imported"], again["answers_imported"], again["skipped"]) == (20, 0, 20)
    assert again["run_id"] is None
    listed = import_tool("gkamradt", GPT4, "gpt-4", store)
    entries = json.loads(GPT4.read_text())
    assert listed["answers_imported"] == len(entries)
    cells: dict[tuple[int, float], list[float]] = defaultdict(list)
    for entry in entries:
        cells[(entry["token_limit"], float(entry["depth_percent"]))].append(entry["score"])
    rows = sql(
        store,
        "SELECT length, depth, avg(original_score), count(accuracy), count(response),"
        " count(*) FILTER (WHERE parse_ok IS NOT NULL) FROM results WHERE epoch = ? GROUP BY ALL",
        [tool_epoch("gkamradt", "gpt-4")],
    )
    assert {(n, d): s for n, d, s, *_ in rows} == {k: mean(v) for k, v in cells.items()}
    assert {tuple(r[3:]) for r in rows} == {(0, 0, 0)}  # no reply: not an answer of ours
    total = sql(store, "SELECT count(*) FROM answers")[0][0]
    assert total == 20 + len(entries)


def test_an_unreadable_file_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    good = FIXTURES / "gkamradt" / "results"
    for file in good.glob("*.json"):
        (folder / file.name).write_bytes(file.read_bytes())
    bad = folder / "m_len_1000_depth_0_results.json"
    bad.write_text('{"context_length": 1000, "depth_percent": 0', encoding="utf-8")
    root = tmp_path / "wh"
    result = invoke("import", "gkamradt", str(folder), "--model", "m", "-w", str(root))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {bad}: not JSON")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not root.exists()  # not even an empty warehouse
    Warehouse(root).ensure()
    assert invoke("import", "gkamradt", str(folder), "--model", "m", "-w", str(root)).exit_code == 2
    assert sql(Warehouse(root), "SELECT count(*) FROM answers")[0][0] == 0


def test_an_unknown_tool_exits_2(tmp_path: Path) -> None:
    result = invoke("import", "lost-in-the-middle", str(tmp_path), "--model", "m")
    assert result.exit_code == 2
    assert "unknown tool 'lost-in-the-middle'" in result.stderr
    path = str(FIXTURES / "ruler")
    asked = invoke("import", "ruler", path, "--model", "m", "--question", "Why?")
    assert asked.exit_code == 2
    assert asked.stderr.startswith("error: --question: only gkamradt's files")


def test_the_question_option_and_the_tool_s_current_layout(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh")
    path = FIXTURES / "gkamradt" / "results"
    result = invoke(
        "import",
        "gkamradt",
        str(path),
        "--model",
        "demo",
        "--question",
        "Where is it quietest?",
        "-w",
        str(store.root),
    )
    assert result.exit_code == 0, result.output
    rows = sql(
        store,
        "SELECT DISTINCT json_extract_string(expected, '$.question') FROM results WHERE epoch = ?",
        ["legacy-gkamradt-demo"],
    )
    assert rows == [("Where is it quietest?",)]


def test_counting_stars_reproduces_the_paper_s_per_length_scores(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh")
    path = FIXTURES / "counting_stars" / "results"
    summary = import_tool("counting-stars", path, "demo", store)
    records = read_counting_stars(path)
    assert summary["answers_imported"] == len(records)
    # The paper's figure per file and sky size: per star index the mean over lines, then the
    # mean over star indices; here from the stored outcomes of each star.
    rows = sql(
        store,
        """
        WITH per_star AS (
            SELECT json_extract_string(c.probe_params, '$.file') AS file, s.length,
                   s.needle_index, avg(s.score) AS score
            FROM stars_outcomes s JOIN cells c USING (cell_id)
            WHERE s.epoch = ? GROUP BY ALL
        )
        SELECT file, length, avg(score) FROM per_star GROUP BY ALL
        """,
        ["legacy-counting-stars-demo"],
    )
    expected = {}
    for file in sorted({r.key[1] for r in records}):
        for size, score in paper_scores(r for r in records if r.key[1] == file).items():
            expected[(file, size)] = score
    assert {(f, n): pytest.approx(s) for f, n, s in rows} == expected
    # needlescope's own figure (mean accuracy per answer) sits in results, as for native runs
    accuracies = sql(store, "SELECT count(accuracy) FROM results WHERE probe = 'counting_stars'")
    assert accuracies == [(len(records),)]


def test_ruler_reproduces_summary_csv(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh")
    root = FIXTURES / "ruler" / "demo-model" / "synthetic"
    summary = import_tool("ruler", root, "demo", store)
    assert summary["epoch"] == "legacy-ruler-demo"
    rows = sql(
        store,
        "SELECT length, task, probe, round(avg(accuracy), 2),"
        " count(*) FILTER (WHERE json_extract(detail, '$.null')::BOOLEAN) || '/' || count(*)"
        " FROM results r JOIN (SELECT cell_id, json_extract_string(probe_params, '$.task') AS task"
        " FROM cells) USING (cell_id) WHERE epoch = ? GROUP BY ALL",
        [summary["epoch"]],
    )
    found = {(str(n), t): (s, nulls) for n, t, _, s, nulls in rows}
    for folder, name in (("4096", "summary.csv"), ("8192", "summary-niah_single_1.csv")):
        expected = read_summary(root / folder / "pred" / name)
        assert {t: v for (f, t), v in found.items() if f == folder} == expected
    probes = {t: p for _, t, p, *_ in rows}
    assert probes == {
        "niah_single_1": "niah",
        "niah_multivalue": "niah",
        "vt": "variable_tracking",
        "qa_1": "qa",
    }


def test_uniah_keeps_its_judge_and_leaves_out_unreadable_judgments(tmp_path: Path) -> None:
    store = Warehouse(tmp_path / "wh")
    path = FIXTURES / "uniah"
    import_tool("uniah", path, "demo", store)
    scores: dict[tuple[str, int, float], list[float]] = defaultdict(list)
    for file in path.rglob("*_results.json"):
        data = json.loads(file.read_text())
        mode = "rag" if "rag_" in str(file.relative_to(path)) else "cases"
        score = data["score"]
        if score != -1:
            scores[(mode, data["context_length"], float(data["depth_percent"]))].append(score)
    rows = sql(
        store,
        "SELECT probe, length, depth, mean_original_score, scored FROM imported_cells"
        " WHERE epoch = 'legacy-uniah-demo'",
    )
    found = {(p, n, d): s for p, n, d, s, k in rows if k}
    assert found == {k: mean(v) for k, v in scores.items()}
    unreadable = sql(
        store,
        "SELECT count(*) FROM results WHERE epoch = 'legacy-uniah-demo'"
        " AND original_score IS NULL AND json_extract_string(detail, '$.judge_error') IS NOT NULL",
    )[0][0]
    assert unreadable == sum(
        json.loads(f.read_text())["score"] == -1 for f in path.rglob("*_results.json")
    )


def test_recall_seed_is_an_alias_of_import_legacy(tmp_path: Path) -> None:
    result = invoke("import", "recall-seed", str(tmp_path / "none.db"), "--model", "m")
    assert result.exit_code == 2
    assert "no such database file" in result.stderr
