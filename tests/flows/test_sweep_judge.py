"""Cases with an LLM judge: the judge's verdict lands beside the keyword grade, per answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from needlescope.warehouse.store import Warehouse
from tests.support.openai_server import FakeOpenAIServer

CASES = """
lighthouse:
  needles:
    - text: "The lighthouse keeper paints the door teal every spring."
      keywords: [paints, teal]
    - text: "The lighthouse lamp burns whale-free olive oil."
      keywords: [olive, oil]
  question: "What does the lighthouse keeper do every spring, and what does the lamp burn?"
  true_answer: "He paints the door teal; the lamp burns olive oil."
"""


def answer_well(body: dict[str, Any]) -> str:
    return "He paints the door teal, and the lamp burns olive oil."


def judge_says(score: int):  # type: ignore[no-untyped-def]
    def reply(body: dict[str, Any]) -> str:
        return json.dumps({"score": score, "reason": "compared with the true answer"})

    return reply


def config_text(model_url: str, judge_url: str) -> str:
    return f"""
name: judged
models:
  - name: answerer
    provider: openai
    base_url: {model_url}
    model: fake
  - name: judge
    provider: openai
    base_url: {judge_url}
    model: fake-judge
    under_test: false
probes:
  - probe: cases
    cases_file: cases.yaml
    lengths: [1500, 3000]
    length_unit: chars
    depths: [10, 90]
    fillers: [prose-en]
    judge: judge
"""


def test_judge_verdicts_are_stored_beside_keyword_recall(cli, tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(CASES)
    wh = tmp_path / "wh"
    with FakeOpenAIServer(answer_well) as model, FakeOpenAIServer(judge_says(3)) as judge:
        config = tmp_path / "judged.yaml"
        config.write_text(config_text(model.base_url, judge.base_url))
        done = cli("run", str(config), "-w", str(wh), "--no-report")
        assert done.returncode == 0, done.stderr[-2000:]
        assert model.requests == 4 and judge.requests == 4
        judged_prompt = judge.last_body["messages"][-1]["content"]  # type: ignore[index]
        assert "olive oil" in judged_prompt and "paints the door teal" in judged_prompt
    con = Warehouse(wh).connect()
    rows = con.execute(
        "SELECT probe, accuracy, json_extract(detail, '$.judge_score')::INT, "
        "json_extract(detail, '$.disagreement')::BOOLEAN, "
        "json_extract_string(detail, '$.judge_model') "
        "FROM results"
    ).fetchall()
    assert len(rows) == 4
    for probe, accuracy, score, disagree, judge_model in rows:
        assert probe == "cases" and judge_model == "judge"
        assert accuracy == 100.0  # every keyword of both needles is in the answer
        assert score == 3
        assert disagree is True  # keywords say right, the judge says wrong
    # The model under test has cells; the judge-only model has none.
    assert con.execute("SELECT DISTINCT model FROM cells").fetchall() == [("answerer",)]
