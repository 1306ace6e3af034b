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


REPO = Path(__file__).resolve().parents[2]
UNIAH_SYSTEM = (
    "You are a helpful AI bot that answers questions for a user. Keep your response short and "
    "direct"
)


def uniah_config(model_url: str, judge_url: str) -> str:
    return f"""
name: judged-uniah
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
    cases_file: {REPO / "configs" / "cases" / "uniah-format.yaml"}
    cases: [soup_ingredients]
    prompts: [uniah]
    length_budget: seed
    lengths: [400]
    depths: [50, 100]
    fillers: [prose-en]
    judge: judge
    judge_prompt: uniah-judge
"""


def test_uniah_prompts_and_judge_in_a_sweep(cli, tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> str:
        sent.append(body)
        # A different answer per cell, so each cell's judge request is its own.
        return f"Smoked paprika, roasted chestnuts and brown butter ({len(sent)})."

    seen: set[str] = set()

    def judge_once_unreadable(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if prompt not in seen:
            seen.add(prompt)
            return "All three ingredients are there."  # no [[n]]: U-NIAH asks again
        return "All three ingredients are there. Rating: [[6]]"

    wh = tmp_path / "wh"
    with (
        FakeOpenAIServer(answer) as model,
        FakeOpenAIServer(judge_once_unreadable) as judge,
    ):
        config = tmp_path / "uniah.yaml"
        config.write_text(uniah_config(model.base_url, judge.base_url))
        done = cli("run", str(config), "-w", str(wh), "--no-report")
        assert done.returncode == 0, done.stderr[-2000:]
        assert model.requests == 2 and judge.requests == 4
        judged = judge.last_body
    for body in sent:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", "user"]
        assert body["messages"][0]["content"] == UNIAH_SYSTEM
        assert body["messages"][2]["content"] == (
            "What are the secret ingredients needed to make the perfect winter soup? "
            "Don't give information outside the document or repeat your findings"
        )
    assert judged is not None and judged["temperature"] == 0.1
    assert judged["messages"][1]["content"].startswith("[Instruction]\n")
    con = Warehouse(wh).connect()
    rows = con.execute(
        "SELECT r.judge_score, json_extract(r.detail, '$.judge_tries')::INT, "
        "json_extract_string(r.detail, '$.judge_version'), r.accuracy, c.length_basis, "
        "c.length_budget, c.prompt_version "
        "FROM results r JOIN cells c USING (cell_id)"
    ).fetchall()
    assert len(rows) == 2
    for score, tries, version, accuracy, basis, budget, prompt in rows:
        assert (score, tries, version) == (6, 2, "uniah-judge")
        assert accuracy == 100.0
        assert (basis, budget, prompt) == ("cl100k_base", "seed", "uniah")
    scores = con.execute("SELECT judge_score FROM cases_scores").fetchall()
    assert scores == [(6,), (6,)]
