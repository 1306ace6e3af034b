"""`needlescope grade`'s inputs: --expected, --answer and --facts are always their text (a
text that names a file is still the text); --expected-file, --answer-file and --facts-file
read a path, or standard input for `-` (once). Misuse is one line on stderr, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from needlescope.flows.cli._app import app

runner = CliRunner()


def graded(args: list[str], stdin: str | bytes | None = None) -> dict:
    done = runner.invoke(app, ["grade", *args], input=stdin)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def refused(args: list[str], stdin: str | None = None) -> str:
    """The one line a misuse prints on stderr (nothing on stdout, exit 2)."""
    done = runner.invoke(app, ["grade", *args], input=stdin)
    assert done.exit_code == 2, done.output
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_an_answer_naming_a_file_in_the_cwd_is_graded_as_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "Makefile").write_text("all:\n\techo 8462931\n")
    monkeypatch.chdir(tmp_path)
    out = graded(["niah", "--expected", '["Makefile"]', "--answer", "Makefile"])
    assert out["accuracy"] == 100.0  # the file holds no "Makefile": its text was not read
    out = graded(["niah", "--expected", '["8462931"]', "--answer", "Makefile"])
    assert out["accuracy"] == 0.0


def test_expected_and_facts_naming_files_are_their_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "expected.json").write_text("[1234]")
    (tmp_path / "facts.json").write_text('{"distractors": ["VVVVV"]}')
    monkeypatch.chdir(tmp_path)
    line = refused(["recall", "--expected", "expected.json", "--answer", '{"1": 1234}'])
    assert "--expected is not JSON" in line
    args = ["niah", "--expected", '["1"]', "--answer", "1", "--facts", "facts.json"]
    assert "--facts is not JSON" in refused(args)


def test_answer_file_reads_the_file(tmp_path: Path) -> None:
    answer = tmp_path / "Makefile"
    answer.write_text("all:\n\techo 8462931\n")
    out = graded(["niah", "--expected", '["8462931"]', "--answer-file", str(answer)])
    assert out["accuracy"] == 100.0


def test_files_are_read_as_utf8_keeping_undecodable_bytes(tmp_path: Path) -> None:
    answer = tmp_path / "answer.txt"
    answer.write_bytes(b'{"1": "\xff"}')
    out = graded(["recall", "--expected", "[1234]", "--answer-file", str(answer)])
    assert out["answered"] == ["\ufffd"] and out["response_repaired"] is True
    out = graded(["recall", "--expected", "[1234]", "--answer-file", "-"], b'{"1": "\xff"}')
    assert out["answered"] == ["\ufffd"] and out["response_repaired"] is True


def test_answer_file_dash_reads_standard_input() -> None:
    out = graded(["niah", "--expected", '["8462931"]', "--answer-file", "-"], "It is 8462931.")
    assert out["accuracy"] == 100.0
    out = graded(["niah", "--expected", '["8462931"]', "--answer-file", "-"], "I forgot.")
    assert out["accuracy"] == 0.0


def test_expected_file_dash_reads_standard_input() -> None:
    out = graded(["recall", "--expected-file", "-", "--answer", '{"1": 1234}'], "[1234]\n")
    assert out["accuracy"] == 100.0


@pytest.mark.parametrize(
    "files",
    [["--expected-file", "--answer-file"], ["--answer-file", "--facts-file"]],
    ids=["expected-answer", "answer-facts"],
)
def test_two_inputs_from_standard_input_is_one_line_exit_2(files: list[str]) -> None:
    args = ["niah"]
    for option in ("--expected", "--answer", "--facts"):
        file_option = f"{option}-file"
        args += [file_option, "-"] if file_option in files else [option, '["1"]']
    line = refused(args, '["8462931"]')
    assert all(option in line for option in files) and "standard input" in line


def test_all_three_from_standard_input_is_one_line_exit_2() -> None:
    args = ["niah", "--expected-file", "-", "--answer-file", "-", "--facts-file", "-"]
    line = refused(args, "{}")
    assert all(o in line for o in ("--expected-file", "--answer-file", "--facts-file"))


@pytest.mark.parametrize("name", ["expected", "answer", "facts"])
def test_both_forms_of_one_input_is_one_line_exit_2(name: str, tmp_path: Path) -> None:
    path = tmp_path / "given.json"
    path.write_text("[1]")
    given = {"expected": ["--expected", '["1"]'], "answer": ["--answer", "1"]}
    given[name] = [f"--{name}", "[1]", f"--{name}-file", str(path)]
    line = refused(["niah", *given["expected"], *given["answer"], *given.get("facts", [])])
    assert f"--{name} " in line and f"--{name}-file" in line


@pytest.mark.parametrize(
    "args",
    [["--answer", "x"], ["--expected", "[1]"], []],
    ids=["no-expected", "no-answer", "neither"],
)
def test_a_missing_required_input_is_one_line_exit_2(args: list[str]) -> None:
    line = refused(["recall", *args])
    missing = "--expected" if "--expected" not in args else "--answer"
    assert f"{missing} " in line and f"{missing}-file" in line and "required" in line


@pytest.mark.parametrize("option", ["--expected-file", "--answer-file", "--facts-file"])
def test_a_missing_file_is_one_line_exit_2_naming_it(option: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-answer.txt"
    given = {"--expected-file": ["--expected", "[1]"], "--answer-file": ["--answer", "1"]}
    given[option] = [option, str(missing)]
    line = refused(
        ["niah", *given["--expected-file"], *given["--answer-file"], *given.get("--facts-file", [])]
    )
    assert option in line and str(missing) in line


def test_a_directory_is_one_line_exit_2_naming_it(tmp_path: Path) -> None:
    line = refused(["niah", "--expected", "[1]", "--answer-file", str(tmp_path)])
    assert "--answer-file" in line and str(tmp_path) in line


def test_facts_file_gives_the_facts(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"reasoning": true, "mistaken": [4, 6, 10]}')
    stars = ["counting_stars", "--expected", "[3, 5, 9]"]
    answer = '{"little_penguin": [3, 6, 10]}'
    out = graded([*stars, "--answer", answer, "--facts-file", str(facts)])
    # The paper's reasoning rule, which only the facts turn on: 3 alone 1, 6 and 10 0.25 each.
    assert out["accuracy"] == pytest.approx(100 * 1.5 / 3)
    assert [n["outcome"] for n in out["needles"]] == ["correct", "mistaken", "mistaken"]
    without = graded([*stars, "--answer", answer])
    assert without["accuracy"] == pytest.approx(100 / 3)
    stdin = graded([*stars, "--answer", answer, "--facts-file", "-"], facts.read_text())
    assert stdin["accuracy"] == out["accuracy"]


def test_ruler_distractors_from_a_facts_file(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"distractors": ["VVVVV", "UUUUU"]}')
    args = ["niah", "--expected", '["QYIHX"]', "--answer", "qyihx and VVVVV"]
    out = graded([*args, "--facts-file", str(facts)])
    assert (out["accuracy"], out["wrong"]) == (100.0, 1)
    assert [r["text"] for r in out["ruler_outcomes"] if r["role"] == "distractor"] == ["VVVVV"]
