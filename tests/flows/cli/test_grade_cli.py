from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from needlescope.flows.cli._app import app

runner = CliRunner()


def grade(expected: str, answer: str, *, files: bool = False) -> dict:
    form = "-file" if files else ""  # --expected-file/--answer-file: paths, not text
    args = [f"--expected{form}", expected, f"--answer{form}", answer]
    result = runner.invoke(app, ["grade", "recall", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_grade_prints_one_json_object_with_per_needle_outcomes() -> None:
    out = grade('{"1": 1111, "2": 2222, "3": 3333}', 'Sure: {"1": 2222, "2": 1111, "3": 9999}')
    assert out["parse_ok"] is True
    assert out["accuracy"] == 0.0 and out["edit_distance"] == 3
    assert (out["correct"], out["missing"], out["extra"], out["wrong"]) == (0, 0, 0, 3)
    assert [n["outcome"] for n in out["needles"]] == ["misorder", "correct", "missing"]
    assert out["hallucinations"] == [{"answer_index": 2, "value": 9999, "key_from": 2, "key_to": 4}]
    assert out["duplicates"] == []


def test_grade_reads_files_and_counts_duplicates(tmp_path: Path) -> None:
    expected, answer = tmp_path / "expected.json", tmp_path / "answer.txt"
    expected.write_text('{"1": 1111, "2": 2222}')
    answer.write_text('```json\n{"1": 1111, "2": 1111, "3": 2222}\n```')
    out = grade(str(expected), str(answer), files=True)
    assert out["accuracy"] == (1 - 1 / 3) * 100
    # The seed's LCS traceback anchors the later copy, so the earlier one is the duplicate.
    assert out["duplicates"] == [{"answer_index": 0, "value": 1111, "needle_indices": [1]}]
    assert all(n["outcome"] == "correct" for n in out["needles"])


def test_reply_without_json_is_a_parse_failure() -> None:
    out = grade("[1234]", "I found nothing.")
    assert out["parse_ok"] is False and out["accuracy"] is None
    assert "needles" not in out


def stars(answer: str, facts: str | None = None) -> dict:
    args = ["grade", "counting_stars", "--expected", "[3, 5, 9]", "--answer", answer]
    result = runner.invoke(app, [*args, *(["--facts", facts] if facts else [])])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_counting_stars_reply_with_no_list_scores_zero_as_a_parse_failure() -> None:
    out = stars("I lost count of the stars.")
    assert out["parse_ok"] is False and out["accuracy"] == 0
    assert (out["correct"], out["missing"], out["extra"]) == (0, 3, 0)
    assert out["parse_error"].startswith('no {"little_penguin": [...]} object')


def test_counting_stars_bare_list_and_the_papers_reasoning_rule() -> None:
    out = stars("[9, 3]")
    assert out["parse_ok"] is True and out["accuracy"] == pytest.approx(200 / 3)
    assert [n["outcome"] for n in out["needles"]] == ["correct", "missing", "correct"]
    reasoning = stars(
        '{"little_penguin": [3, 6, 10]}', '{"reasoning": true, "mistaken": [4, 6, 10]}'
    )
    # 3 without its mistaken 4: 1; 5's mistaken 6 alone: 0.25; 9's mistaken 10 alone: 0.25.
    assert reasoning["accuracy"] == pytest.approx(100 * 1.5 / 3)
    assert [n["outcome"] for n in reasoning["needles"]] == ["correct", "mistaken", "mistaken"]


def test_bad_expected_is_a_one_line_error() -> None:
    result = runner.invoke(app, ["grade", "recall", "--expected", "{nope", "--answer", "{}"])
    assert result.exit_code == 2
    assert "--expected is not JSON" in result.output
    result = runner.invoke(app, ["grade", "nosuch", "--expected", "[1]", "--answer", "{}"])
    assert result.exit_code == 2 and "unknown probe 'nosuch'" in result.output


def test_cases_answer_graded_by_keywords_and_by_a_judge_model(tmp_path: Path) -> None:
    import json as json_module

    from tests.support.openai_server import FakeOpenAIServer

    expected = {
        "needles": ["Figs are one of the secret ingredients."],
        "keywords": [["figs"]],
        "question": "What is the secret ingredient?",
        "true_answer": "Figs.",
    }
    with FakeOpenAIServer(lambda body: json_module.dumps({"score": 9, "reason": "right"})) as srv:
        config = tmp_path / "judge.yaml"
        config.write_text(
            "name: j\nmodels:\n"
            f"  - {{name: judge, provider: openai, base_url: '{srv.base_url}', model: x}}\n"
            "probes: [{probe: recall, lengths: [100], needle_counts: [1]}]\n"
        )
        result = runner.invoke(
            app,
            [
                "grade",
                "cases",
                "--expected",
                json_module.dumps(expected),
                "--answer",
                "It is figs.",
                "--judge",
                "judge",
                "--config",
                str(config),
            ],
        )
        assert srv.requests == 1
        assert "Figs." in srv.last_body["messages"][-1]["content"]  # type: ignore[index]
    assert result.exit_code == 0, result.output
    out = json_module.loads(result.stdout)
    assert out["accuracy"] == 100.0
    assert (out["judge_score"], out["judge_model"], out["disagreement"]) == (9, "judge", False)


def test_grade_judges_with_uniahs_judge(tmp_path: Path) -> None:
    from tests.support.openai_server import FakeOpenAIServer

    expected = {
        "needles": [" Figs are one of the secret ingredients. "],
        "keywords": [["Figs"]],
        "question": "What is the secret ingredient?",
        "true_answer": "Figs.",
    }
    replies = iter(["Close enough.", "The answer is right. Rating: [[9]]"])
    with FakeOpenAIServer(lambda body: next(replies)) as srv:
        config = tmp_path / "judge.yaml"
        config.write_text(
            "name: j\nmodels:\n"
            f"  - {{name: judge, provider: openai, base_url: '{srv.base_url}', model: x}}\n"
            "probes: [{probe: recall, lengths: [100], needle_counts: [1]}]\n"
        )
        result = runner.invoke(
            app,
            [
                "grade",
                "cases",
                "--expected",
                json.dumps(expected),
                "--answer",
                "Figs",
                "--judge",
                "judge",
                "--config",
                str(config),
                "--judge-prompt",
                "uniah-judge",
            ],
        )
        body = srv.last_body
        assert srv.requests == 2  # the first verdict did not read: asked again
    assert result.exit_code == 0, result.output
    assert body is not None and body["temperature"] == 0.1 and "max_tokens" not in body
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert body["messages"][1]["content"].startswith("[Instruction]\nPlease act as an impartial")
    out = json.loads(result.stdout)
    assert (out["judge_score"], out["judge_tries"], out["judge_version"]) == (9, 2, "uniah-judge")


def test_judge_needs_a_config() -> None:
    result = runner.invoke(
        app, ["grade", "cases", "--expected", "{}", "--answer", "x", "--judge", "j"]
    )
    assert result.exit_code == 2 and "--judge needs --config" in result.output


def test_grade_mrcr_and_latent_list_print_one_json_object() -> None:
    mrcr = ["grade", "mrcr", "--expected", '{"nonce": "XyZ0123456", "reply": "a tapir song"}']
    result = runner.invoke(app, [*mrcr, "--answer", "XyZ0123456a tapir poem"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # difflib by hand: "a tapir " and "o" match, 2 × 9 / 24 = 0.75.
    assert out["accuracy"] == 75.0 and out["detail"]["nonce_hit"] is True
    latent = ["grade", "latent_list", "--expected", "[12, 40, 7]"]
    result = runner.invoke(app, [*latent, "--answer", "x is [12, 40, 7] now"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["accuracy"] == 100.0
    result = runner.invoke(app, [*latent, "--answer", "I lost track"])
    out = json.loads(result.stdout)
    assert (out["parse_ok"], out["accuracy"]) == (False, None)
