"""The LLM judge: its prompt, reading its verdict, and disagreement with keyword recall."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import ConfigError
from needlescope.grading import _judge as judge

REPO = Path(__file__).resolve().parents[2]


def test_messages_hold_the_rubric_then_the_texts() -> None:
    system, user = judge.judge_messages("Which bridge?", "The green one.", " A green bridge. ")
    assert (system.role, user.role) == ("system", "user")
    assert judge.DEFAULT_RUBRIC.strip() in system.content
    assert '"score"' in system.content and '"score"' in user.content
    for text in ("Which bridge?", "The green one.", "A green bridge."):
        assert text in user.content
    order = [user.content.index(t) for t in ("<question>", "<reference_answer>", "<answer>")]
    assert order == sorted(order)


def test_an_empty_answer_is_shown_as_empty() -> None:
    _, user = judge.judge_messages("q?", "a", "   ")
    assert "(the answer is empty)" in user.content


def test_custom_rubric_replaces_the_default() -> None:
    system, _ = judge.judge_messages("q?", "a", "b", rubric="Give 10 to everything.")
    assert "Give 10 to everything." in system.content
    assert judge.DEFAULT_RUBRIC.strip() not in system.content


def test_default_rubric_is_the_shipped_file() -> None:
    shipped = REPO / "configs" / "judge_rubric.md"
    assert judge.load_rubric(shipped) == judge.DEFAULT_RUBRIC
    assert judge.load_rubric(None) == judge.DEFAULT_RUBRIC
    for level in ("- 10:", "- 7:", "- 5:", "- 3:", "- 1:"):
        assert level in judge.DEFAULT_RUBRIC


def test_rubric_file_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"rubric file .*missing\.md: no such file"):
        judge.load_rubric(tmp_path / "missing.md")
    empty = tmp_path / "empty.md"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is empty"):
        judge.load_rubric(empty)


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        ('{"score": 7, "reason": "Two of three facts."}', 7, "Two of three facts"),
        ('```json\n{"score": 10, "reason": "All there."}\n```', 10, "All there"),
        ('Here you go: {"Score": "9", "explanation": "close"} thanks', 9, "close"),
        ('{"score": 4.0}', 4, None),
        ("[[7]]", 7, None),
        ("The answer names one fact. [[3]]", 3, "The answer names one fact"),
        ("Score: 8", 8, None),
        ("score: 6/10 - misses the bridge", 6, "misses the bridge"),
        ("**Score:** 5\nReason: half right", 5, "Reason: half right"),
        ("Rating = 2", 2, None),
        ("The score is 1.", 1, "The"),
        ('{"score": 6, "reason": "cut off', 6, 'reason": "cut off'),
        ('{"score": 7} and later [[2]]', 7, None),  # JSON first
    ],
)
def test_parse_verdict_reads_the_score(text: str, score: int, reason: str | None) -> None:
    verdict = judge.parse_verdict(text)
    assert (verdict.score, verdict.error) == (score, None)
    assert verdict.reason == reason


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[[11]]", "score 11 is outside 1–10"),
        ('{"score": 0}', "score 0 is outside 1–10"),
        ("Score: -3", "score -3 is outside 1–10"),
        ("[[7.5]]", "score 7.5 is not a whole number"),
        ('{"score": "seven"}', "score seven is not a number"),
        ('{"score": null}', "score None is not a number"),
        ('{"score": true}', "score True is not a number"),
        ("I think it is mostly right.", "no score found"),
        ("", "no score found"),
    ],
)
def test_parse_verdict_errors(text: str, error: str) -> None:
    verdict = judge.parse_verdict(text)
    assert verdict.score is None
    assert verdict.error is not None and error in verdict.error


@settings(max_examples=500, deadline=None)
@given(st.text() | st.from_regex(r"\{\"score\": .{0,12}\}|\[\[.{0,6}\]\]|Score: .{0,8}"))
def test_parse_verdict_never_raises(text: str) -> None:
    verdict = judge.parse_verdict(text)
    assert (verdict.score is None) == (verdict.error is not None)
    assert verdict.score is None or 1 <= verdict.score <= 10


def test_parse_verdict_survives_deep_nesting_and_huge_numbers() -> None:
    assert judge.parse_verdict("{" + "[" * 1900 + "}").error is not None
    assert "outside" in str(judge.parse_verdict("[[" + "9" * 5000 + "]]").error)


@pytest.mark.parametrize(
    ("accuracy", "score", "disagree"),
    [
        (100.0, 10, False),  # both correct
        (0.0, 1, False),  # both wrong
        (50.0, 7, False),  # both at their thresholds: both correct
        (49.9, 7, True),  # judge yes, keywords no
        (100.0, 6, True),  # keywords yes, judge no
        (None, 9, False),  # nothing to compare
        (80.0, None, False),
    ],
)
def test_disagreement(accuracy: float | None, score: int | None, disagree: bool) -> None:
    assert judge.disagreement(accuracy, score) is disagree


def test_records_store_the_verdict_and_the_disagreement() -> None:
    verdict = judge.parse_verdict('{"score": 9, "reason": "all three"}')
    record = judge.judge_record(verdict, model="j", keyword_accuracy=33.3, raw="x" * 5000)
    assert record == {
        "judge_model": "j",
        "judge_version": judge.JUDGE_VERSION,
        "judge_score": 9,
        "judge_reason": "all three",
        "judge_error": None,
        "judge_raw": "x" * judge.RAW_CHARS,
        "judge_tries": 1,
        "disagreement": True,
    }
    failed = judge.failed_record("j", "timeout", "no reply\nwithin 600 s")
    assert failed["judge_score"] is None
    assert failed["judge_error"] == "timeout: no reply within 600 s"
    assert failed["disagreement"] is False


# --- U-NIAH's judge (judge_prompt: uniah-judge) ----------------------------------------------

# What langchain 0.3.19 (U-NIAH's pin) sends for labeled_score_string with U-NIAH's criterion,
# for these three texts (rendered with LangChain itself, once, to write this test).
UNIAH_USER = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response "
    "provided by an AI assistant to the user question displayed below. For this evaluation, you "
    "should primarily consider the following criteria:\naccuracy: \n"
    "                Score 1: The answer is completely unrelated to the reference.\n"
    "                Score 3: The answer has minor relevance but does not align with the "
    "reference.\n"
    "                Score 5: The answer has moderate relevance but contains inaccuracies.\n"
    "                Score 7: The answer partially aligns with the reference but has minor "
    "omissions.\n"
    "                Score 10: The answer is aligned with the reference. No need to consider the "
    "information order and no need to be exact the same as the reference.\n"
    "                Only respond with a numberical score!\n"
    "[Ground truth]\nFigs, Prosciutto, and Goat cheese.\nBegin your evaluation by providing a "
    "short explanation. Be as objective as possible. After providing your explanation, you must "
    'rate the response on a scale of 1 to 10 by strictly following this format: "[[rating]]", '
    'for example: "Rating: [[5]]".\n\n[Question]\nWhat are the secret ingredients?\n\n'
    "[The Start of Assistant's Answer]\nFigs {x} and goat cheese.\n"
    "[The End of Assistant's Answer]"
)


def test_uniah_judge_messages_byte_for_byte() -> None:
    system, user = judge.uniah_judge_messages(
        "What are the secret ingredients?",
        "Figs, Prosciutto, and Goat cheese.",
        "Figs {x} and goat cheese.",
    )
    assert system.role == "system" and system.content == "You are a helpful assistant."
    assert user.role == "user" and user.content == UNIAH_USER


def test_uniah_judge_request_sends_temperature_0_1_and_no_max_tokens() -> None:
    request = judge.judge_request(judge.UNIAH_JUDGE, "q?", "a", "")
    assert (request.temperature, request.max_tokens) == (0.1, None)
    assert "[The Start of Assistant's Answer]\n\n[The End" in request.messages[1].content
    assert judge.judge_request(judge.UNIAH_JUDGE, "q?", "a", "b", max_tokens=64).max_tokens == 64
    own = judge.judge_request(judge.JUDGE_VERSION, "q?", "a", "b", max_tokens=64)
    assert (own.temperature, own.max_tokens) == (0.0, judge.JUDGE_MAX_TOKENS)
    assert own.messages == judge.judge_messages("q?", "a", "b")
    with pytest.raises(ConfigError, match="unknown judge prompt 'nope'"):
        judge.judge_request("nope", "q?", "a", "b")


# Each reply as LangChain's ScoreStringResultOutputParser reads it (checked against it).
@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("The answer names all three. Rating: [[7]]", 7),  # the format asked for
        ("[[10]]", 10),
        ("[[1]] is my rating", 1),
        ("[[\n7]] then [[3]]", 3),  # brackets hold one line: the first pair spans two
        ("[[ 7 ]]", None),  # spaces
        ("[[07]]", None),  # a leading zero
        ("[[7.0]]", None),  # not written plainly
        ("[[7/10]]", None),
        ("[[11]]", None),  # out of range
        ("[[0]]", None),
        ('Following "[[rating]]": Rating: [[8]]', None),  # the first brackets are read
        ("Rating: 8", None),  # no brackets at all
        ("8", None),  # "Only respond with a numberical score!" taken at its word
        ("", None),
    ],
)
def test_uniah_verdicts_are_read_as_langchain_reads_them(reply: str, score: int | None) -> None:
    verdict = judge.read_verdict(judge.UNIAH_JUDGE, reply)
    assert verdict.score == score
    assert (verdict.error is None) == (score is not None)


def reply(text: str) -> judge.Reply:
    return judge.Reply(text, "stop", 10, 5, None, 0.1)


def asker(*replies: judge.Reply | str):  # type: ignore[no-untyped-def]
    sent: list[tuple[judge.ChatRequest, int]] = []

    async def ask(request: judge.ChatRequest, attempt: int) -> judge.Reply | str:
        sent.append((request, attempt))
        return replies[attempt - 1]

    return ask, sent


EXPECTED = {"question": "Which ingredients?", "true_answer": "Figs and goat cheese."}


def test_uniah_judge_asks_again_until_a_verdict_reads() -> None:
    ask, sent = asker(reply("Good answer."), reply("Rating: [[x]]"), reply("Rating: [[8]]"))
    record = asyncio.run(judge.judge(ask, judge.UNIAH_JUDGE, EXPECTED, "Figs.", model="j"))
    assert [a for _, a in sent] == [1, 2, 3] and sent[0][0] == sent[2][0]
    assert (record["judge_score"], record["judge_tries"]) == (8, 3)
    assert record["judge_version"] == "uniah-judge" and record["judge_error"] is None
    assert record["judge_raw"] == "Rating: [[8]]"
    assert "judge_unreadable" not in record


def test_three_unreadable_verdicts_are_no_score_never_minus_one() -> None:
    ask, sent = asker(*(reply("I would say 8.") for _ in range(3)))
    record = asyncio.run(judge.judge(ask, judge.UNIAH_JUDGE, EXPECTED, "Figs.", model="j"))
    assert len(sent) == 3
    assert record["judge_score"] is None and record["judge_unreadable"] is True
    assert record["judge_error"] == "no [[rating]] in the judge's reply (3 tries)"


def test_needlescopes_judge_asks_once_and_cuts_the_raw_reply() -> None:
    ask, sent = asker(reply("no verdict " * 400))
    record = asyncio.run(judge.judge(ask, judge.JUDGE_VERSION, EXPECTED, "Figs.", model="j"))
    assert len(sent) == 1 and sent[0][0].temperature == 0.0
    assert record["judge_score"] is None and record["judge_version"] == "judge-v1"
    assert len(record["judge_raw"]) == judge.RAW_CHARS
    ask, _ = asker(reply('{"score": 6, "reason": "half"}'))
    record = asyncio.run(judge.judge(ask, judge.JUDGE_VERSION, EXPECTED, "Figs.", model="j"))
    assert (record["judge_score"], record["judge_reason"]) == (6, "half")


def test_a_judge_that_cannot_be_asked_is_recorded_as_such() -> None:
    ask, _ = asker("the budget was spent")
    record = asyncio.run(judge.judge(ask, judge.UNIAH_JUDGE, EXPECTED, "Figs.", model="j"))
    assert record["judge_score"] is None
    assert record["judge_error"] == "not judged: the budget was spent"
