"""MRCR: the conversation, the final question, fitting to a token count, OpenAI's score."""

from __future__ import annotations

import asyncio
import re
from difflib import SequenceMatcher
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.errors import LengthError
from needlescope.fitting import tokens
from needlescope.probes.mrcr import (
    OPENAI_BINS,
    afit_conversation,
    content_tokens,
    final_question,
    fit_conversation,
    grade,
    length_bin,
    openai_grade,
    ordinal,
)
from needlescope.probes.mrcr.conversation import NONCE_LENGTH, conversation, draw_nonce
from needlescope.probes.mrcr.pieces import FORMS, MIN_WORDS, TOPICS, piece, request
from needlescope.probes.mrcr.score import score
from needlescope.providers.base import Message

COUNT = content_tokens(tokens.count)

# --- the final question -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (8, "8th"), (10, "10th"), (11, "11th"),
        (12, "12th"), (13, "13th"), (14, "14th"), (21, "21st"), (22, "22nd"), (23, "23rd"),
        (101, "101st"), (111, "111th"), (112, "112th"), (113, "113th"), (1002, "1002nd"),
    ],
)  # fmt: skip
def test_english_ordinals(n: int, expected: str) -> None:
    assert ordinal(n) == expected


def test_ordinal_starts_at_one() -> None:
    with pytest.raises(ValueError, match="starts at 1"):
        ordinal(0)


def test_final_question_byte_for_byte() -> None:
    assert final_question("aYooSG8CQg", 2, "poem", "tapirs") == (
        "Prepend aYooSG8CQg to the 2nd (1 indexed) poem about tapirs. "
        "Do not include any other text in your response."
    )
    assert final_question("Zz09Zz09Zz", 13, "short story", "lighthouses").encode() == (
        b"Prepend Zz09Zz09Zz to the 13th (1 indexed) short story about lighthouses."
        b" Do not include any other text in your response."
    )


def test_nonce_is_ten_alphanumerics() -> None:
    nonces = {draw_nonce(Random(i)) for i in range(200)}
    assert len(nonces) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9]{10}", n) for n in nonces)
    assert NONCE_LENGTH == 10


# --- the conversation -------------------------------------------------------------------------


@pytest.mark.parametrize("needles", [2, 4, 8])
def test_conversation_alternates_and_repeats_one_request(needles: int) -> None:
    c = conversation(7, needles, 12)
    roles = [m.role for m in c.messages]
    assert roles == ["user", "assistant"] * (needles + 12) + ["user"]
    assert c.messages[-1].content == final_question(c.nonce, c.ask, c.form, c.topic)
    asked = request(c.form, c.topic)
    repeats = [i for i in range(0, len(c.messages) - 1, 2) if c.messages[i].content == asked]
    assert [i // 2 for i in repeats] == list(c.needle_pairs)
    assert len(repeats) == needles
    assert tuple(c.messages[i + 1].content for i in repeats) == c.replies
    assert len(set(c.replies)) == needles
    assert c.reply == c.replies[c.ask - 1]
    assert 1 <= c.ask <= needles
    assert c.expected()["reply"] == c.reply and c.expected()["nonce"] == c.nonce


def test_every_reply_is_at_least_100_tokens_and_about_its_topic() -> None:
    c = conversation(3, 8, 40)
    for user, assistant in zip(c.messages[:-1:2], c.messages[1::2], strict=True):
        form, topic = re.fullmatch(r"Write a (.+) about (.+)", user.content).groups()  # type: ignore[union-attr]
        assert form in FORMS and topic in TOPICS
        assert topic in assistant.content.lower()
        assert tokens.count(assistant.content) >= 100
        assert len(assistant.content.split()) >= MIN_WORDS


def test_filler_holds_near_misses_but_never_the_repeated_request() -> None:
    c = conversation(11, 2, 60)
    fillers = [m.content for i, m in enumerate(c.messages[:-1:2]) if i not in c.needle_pairs]
    assert request(c.form, c.topic) not in fillers
    assert any(c.topic in f and c.form not in f for f in fillers)  # same topic, another form
    assert any(f.startswith(f"Write a {c.form} about") and c.topic not in f for f in fillers)


def test_same_seed_same_conversation_other_seed_another() -> None:
    assert conversation(5, 4, 20) == conversation(5, 4, 20)
    assert conversation(5, 4, 20).messages != conversation(6, 4, 20).messages
    assert conversation("cell-a", 2, 3) == conversation("cell-a", 2, 3)


def test_more_filler_keeps_the_draws_and_the_pieces() -> None:
    short, long = conversation(9, 4, 10), conversation(9, 4, 30)
    assert (short.nonce, short.ask, short.form, short.topic, short.replies) == (
        long.nonce, long.ask, long.form, long.topic, long.replies,
    )  # fmt: skip
    assert set(short.messages[:-1]) <= set(long.messages[:-1])


def test_ask_can_be_chosen() -> None:
    c = conversation(9, 4, 5, ask=3)
    assert c.ask == 3 and "the 3rd (1 indexed)" in c.messages[-1].content
    with pytest.raises(ValueError, match=r"ask must lie in 1\.\.4"):
        conversation(9, 4, 5, ask=5)


def test_pieces_are_seeded() -> None:
    for form in FORMS:
        assert piece(form, "otters", Random(1)) == piece(form, "otters", Random(1))
        assert piece(form, "otters", Random(1)) != piece(form, "otters", Random(2))


# --- fitting to a length in tokens ------------------------------------------------------------


@pytest.mark.parametrize(("needles", "target"), [(2, 1500), (4, 4000), (8, 8000), (2, 30_000)])
def test_fit_is_the_longest_conversation_within_the_target(needles: int, target: int) -> None:
    fitted = fit_conversation(13, needles, COUNT, target)
    assert fitted.measured == COUNT(fitted.conversation.messages) <= target
    assert fitted.conversation == conversation(13, needles, fitted.filler_pairs)
    one_more = conversation(13, needles, fitted.filler_pairs + 1)
    assert COUNT(one_more.messages) > target
    assert fitted.calls <= 12


def test_async_fit_matches_the_plain_one() -> None:
    async def measure(messages: tuple[Message, ...]) -> int:
        return COUNT(messages)

    fitted = asyncio.run(afit_conversation(13, 4, measure, 5000))
    assert fitted == fit_conversation(13, 4, COUNT, 5000)


def test_fit_refuses_a_target_the_repeats_alone_exceed() -> None:
    with pytest.raises(LengthError, match="repeats and the question alone"):
        fit_conversation(13, 8, COUNT, 500)


def test_content_tokens_is_openais_count() -> None:
    c = conversation(1, 2, 1)
    assert COUNT(c.messages) == sum(len(tokens.encode(m.content)) for m in c.messages)


def test_length_bins_double_and_match_openais() -> None:
    assert OPENAI_BINS[0] == (4096, 8192) and OPENAI_BINS[-1] == (524_288, 1_048_576)
    assert len(OPENAI_BINS) == 8
    assert [length_bin(n) for n in (1, 1000, 4095, 4096, 8191, 8192, 600_000)] == [
        (1, 2), (512, 1024), (2048, 4096), (4096, 8192), (4096, 8192), (8192, 16384),
        (524_288, 1_048_576),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="must be positive"):
        length_bin(0)


# --- the score --------------------------------------------------------------------------------

NONCE = "XyZ12abc90"


def test_worked_pair_computed_by_hand() -> None:
    # "the bat sat" against "the cat sat": the longest common block is "at sat" (6), then
    # "the " (4) to its left; 10 matched characters of 11 + 11: ratio = 2 × 10 / 22 = 10/11.
    assert SequenceMatcher(None, "the bat sat", "the cat sat").ratio() == 20 / 22
    result = score(NONCE + "the bat sat", NONCE, ["the cat sat"], 1)
    assert result.accuracy == pytest.approx(100 * 10 / 11)
    assert result.nonce_hit and result.wrong_occurrence is None


def test_openai_rule_needs_the_nonce_first() -> None:
    assert openai_grade("the cat sat", NONCE + "the cat sat", NONCE) == 0
    assert openai_grade(" " + NONCE + "the cat sat", NONCE + "the cat sat", NONCE) == 0
    assert openai_grade(NONCE + "the cat sat", NONCE + "the cat sat", NONCE) == 1.0
    missing = score("the cat sat", NONCE, ["the cat sat"], 1)
    assert missing.accuracy == 0 and not missing.nonce_hit
    assert missing.ratios == (1.0,)  # what it copied is still recorded


def test_the_nonce_is_removed_once_from_the_front_only() -> None:
    # removeprefix, as OpenAI's grade: a second nonce stays in the compared text.
    twice = score(NONCE + NONCE + "abc", NONCE, ["abc"], 1)
    assert twice.accuracy == pytest.approx(
        100 * SequenceMatcher(None, NONCE + "abc", "abc").ratio()
    )
    spaced = score(NONCE + "\nabc", NONCE, ["abc"], 1)
    assert spaced.accuracy == pytest.approx(100 * 2 * 3 / 7)


def test_the_wrong_occurrence_is_named() -> None:
    replies = ["first poem about owls", "second verse of owls", "third song on owls"]
    result = score(NONCE + "second verse of owls", NONCE, replies, 1)
    assert result.wrong_occurrence == 2 and result.closest == 2
    assert result.accuracy < 100
    right = score(NONCE + "first poem about owls", NONCE, replies, 1)
    assert right.accuracy == 100 and right.wrong_occurrence is None and right.closest == 1


def test_ties_go_to_the_asked_occurrence() -> None:
    result = score(NONCE + "zzz", NONCE, ["aaa", "bbb", "ccc"], 2)
    assert result.closest == 2 and result.wrong_occurrence is None


def test_grade_reads_a_bare_nonce_and_reply() -> None:
    g = grade({"nonce": NONCE, "reply": "the cat sat"}, {}, NONCE + "the bat sat")
    assert g.parse_ok and g.accuracy == pytest.approx(100 * 10 / 11)
    assert g.figures == {"nonce_hit": True, "wrong_occurrence": None}


def test_grade_of_a_conversation() -> None:
    c = conversation(21, 4, 3, ask=2)
    g = grade(c.expected(), {}, c.nonce + c.replies[3])
    assert g.figures["wrong_occurrence"] == 4
    assert g.detail["ask"] == 2 and len(g.detail["ratios"]) == 4
    assert grade(c.expected(), {}, c.nonce + c.reply).accuracy == 100


@pytest.mark.parametrize(
    "expected",
    [None, [], "x", {"nonce": 1, "reply": "a"}, {"nonce": "n"}, {"nonce": "n", "reply": "a",
     "replies": ["b"], "ask": 1}, {"nonce": "n", "reply": "a", "replies": ["a"], "ask": True}],
)  # fmt: skip
def test_grade_names_an_unreadable_expected(expected: object) -> None:
    g = grade(expected, {}, "anything")
    assert g.parse_ok is False and g.accuracy is None and "nonce" in (g.parse_error or "")


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(max_size=12), st.lists(st.text(), min_size=1, max_size=4), st.data())
def test_score_never_raises(
    response: str, nonce: str, replies: list[str], data: st.DataObject
) -> None:
    ask = data.draw(st.integers(1, len(replies)))
    result = score(response, nonce, replies, ask)
    assert 0 <= result.accuracy <= 100
    assert result.nonce_hit == response.startswith(nonce)
    assert result.accuracy == 100 * openai_grade(response, nonce + replies[ask - 1], nonce)
    g = grade(
        {"nonce": nonce, "reply": replies[ask - 1], "replies": replies, "ask": ask}, {}, response
    )
    assert g.parse_ok and g.accuracy == result.accuracy
