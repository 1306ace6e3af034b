"""Worked examples and properties of the recall grader (needlescope.grading.recall)."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import LCSseq

from needlescope.grading.recall import (
    Duplicate,
    Hallucination,
    NeedleOutcome,
    canonical_value,
    duplicates,
    grade_recall,
    hallucinations,
    lcs_anchors,
    needle_outcomes,
    read_reply,
    recall_accuracy,
)

EXPECTED = [1781, 4725, 3306, 9012, 5555]


def as_reply(values: Sequence[object]) -> str:
    """A reply listing ``values``; an empty list is fenced (a bare ``{}`` has no digit key)."""
    body = json.dumps({str(i): v for i, v in enumerate(values, start=1)})
    return body if values else f"```json\n{body}\n```"


def parse_recall_answer(reply: str) -> Parsed:
    return Parsed(read_reply(reply))


class Parsed:
    """The reading of a reply, as the tests below look at it."""

    def __init__(self, reading: object) -> None:
        self.reading = reading
        self.ok = getattr(reading, "values", None) is not None
        self.error = getattr(reading, "error", None)
        self.source = getattr(reading, "source", None)
        values = getattr(reading, "values", None)
        self.values = None if values is None else tuple(values)


def outcomes_of(expected: Sequence[Hashable], answered: Sequence[Hashable]) -> list[str]:
    return [o.outcome for o in needle_outcomes(expected, answered)]


# --------------------------------------------------------------------------- worked examples


def test_perfect_answer_scores_100() -> None:
    grade = grade_recall(EXPECTED, as_reply(EXPECTED))
    assert grade.parse_ok
    assert grade.parse_error is None
    assert grade.accuracy == 100.0
    assert grade.edit_distance == 0
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (5, 0, 0, 0)
    assert grade.answered == tuple(EXPECTED)
    assert outcomes_of(EXPECTED, grade.answered) == ["correct"] * 5


def test_dropped_needle() -> None:
    answered = [1781, 4725, 9012, 5555]  # 3306 left out, later needles shift one key up
    grade = grade_recall(EXPECTED, as_reply(answered))
    assert grade.edit_distance == 1
    assert grade.accuracy == pytest.approx(80.0)
    # Counting by key: keys 3 and 4 now hold the wrong needles, key 5 is absent.
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (2, 1, 0, 2)
    assert outcomes_of(EXPECTED, answered) == [
        "correct",
        "correct",
        "missing",
        "correct",
        "correct",
    ]
    assert hallucinations(EXPECTED, answered) == []
    assert duplicates(EXPECTED, answered) == []


def test_swapped_pair_is_a_misorder() -> None:
    answered = [1781, 3306, 4725, 9012, 5555]
    grade = grade_recall(EXPECTED, as_reply(answered))
    assert grade.edit_distance == 2
    assert grade.accuracy == pytest.approx(60.0)
    assert (grade.correct, grade.wrong) == (3, 2)
    # The traceback steps back in the answer first, so the later copy (3306) is the anchor.
    assert lcs_anchors(EXPECTED, answered) == [(0, 0), (2, 1), (3, 3), (4, 4)]
    assert needle_outcomes(EXPECTED, answered)[1] == NeedleOutcome(2, 4725, False, "misorder")
    assert outcomes_of(EXPECTED, answered) == [
        "correct",
        "misorder",
        "correct",
        "correct",
        "correct",
    ]


def test_hallucination_is_located_between_its_anchors() -> None:
    answered = [1781, 4725, 7777, 3306, 9012, 5555, 8888]
    grade = grade_recall(EXPECTED, as_reply(answered))
    assert grade.edit_distance == 2
    assert grade.accuracy == pytest.approx((1 - 2 / 7) * 100)
    assert grade.extra == 2  # keys 6 and 7 do not exist in the expected answer
    assert hallucinations(EXPECTED, answered) == [
        Hallucination(answer_index=2, value=7777, key_from=2, key_to=3),
        # After the last anchor: key_to is N + 1.
        Hallucination(answer_index=6, value=8888, key_from=5, key_to=6),
    ]
    assert outcomes_of(EXPECTED, answered) == ["correct"] * 5


def test_hallucination_before_first_anchor_and_without_anchors() -> None:
    assert hallucinations(EXPECTED, [1111, 1781]) == [Hallucination(0, 1111, 0, 1)]
    assert hallucinations(EXPECTED, [1111, 2222]) == [
        Hallucination(0, 1111, 0, 6),
        Hallucination(1, 2222, 0, 6),
    ]


def test_duplicate_is_its_own_category() -> None:
    answered = [1781, 4725, 4725, 3306, 9012, 5555]
    assert outcomes_of(EXPECTED, answered) == ["correct"] * 5
    assert hallucinations(EXPECTED, answered) == []
    # The anchored copy is the later one (tie rule); the other is the duplicate.
    assert lcs_anchors(EXPECTED, answered)[1] == (1, 2)
    assert duplicates(EXPECTED, answered) == [
        Duplicate(answer_index=1, value=4725, needle_indices=(2,))
    ]


def test_value_expected_twice_is_not_a_duplicate_when_answered_twice() -> None:
    expected = [1111, 2222, 1111]
    assert duplicates(expected, [1111, 2222, 1111]) == []
    # Three copies of a value expected twice: the unanchored copy is the duplicate.
    assert lcs_anchors(expected, [1111, 1111, 2222, 1111]) == [(0, 1), (1, 2), (2, 3)]
    assert duplicates(expected, [1111, 1111, 2222, 1111]) == [Duplicate(0, 1111, (1, 3))]
    # One copy answered: it anchors one needle, the other needle is missing.
    assert outcomes_of(expected, [2222, 1111]) == ["missing", "correct", "correct"]
    # Both copies answered, but 2222 after them: 2222 is the misordered needle.
    assert outcomes_of(expected, [1111, 1111, 2222]) == ["correct", "misorder", "correct"]


def test_misorder_versus_missing() -> None:
    answered = [5555, 1781, 4725, 3306, 9012]  # last needle moved to the front
    assert outcomes_of(EXPECTED, answered) == [
        "correct",
        "correct",
        "correct",
        "correct",
        "misorder",
    ]
    assert outcomes_of(EXPECTED, [1781]) == ["correct"] + ["missing"] * 4


def test_fenced_json() -> None:
    reply = "Here you go:\n```json\n" + as_reply(EXPECTED) + "\n```\nHope that helps."
    parsed = parse_recall_answer(reply)
    assert parsed.ok and parsed.source == "json-fence"
    assert grade_recall(EXPECTED, reply).accuracy == 100.0


def test_first_fence_holding_an_object_wins() -> None:
    reply = '```json\n[1, 2]\n```\n```json\n{"1": 1781}\n```\n```json\n{"1": 9}\n```'
    parsed = parse_recall_answer(reply)
    assert parsed.source == "json-fence"
    assert parsed.values == (1781,)


def test_text_around_json() -> None:
    reply = "I found these numbers: " + as_reply(EXPECTED[:4]) + " -- that is all of them."
    parsed = parse_recall_answer(reply)
    assert parsed.ok and parsed.source == "bare"
    grade = grade_recall(EXPECTED, reply)
    assert grade.accuracy == pytest.approx(80.0)
    assert grade.missing == 1


def test_bare_object_skips_objects_without_a_digit_key() -> None:
    # The seed's bare-object rule: the first balanced object (one level of nesting at most,
    # candidates not overlapping) with a digit key. The wrapper object has none, and the
    # object inside it is part of that candidate: nothing is found.
    reply = 'Format {"a": 1}; wrapped {"answer": {"2": 4725, "1": 1781}} done'
    assert not parse_recall_answer(reply).ok
    later = 'Format {"a": 1}; then {"2": 4725, "1": 1781} done'
    parsed = parse_recall_answer(later)
    assert parsed.source == "bare"
    assert parsed.values == (1781, 4725)  # ordered by numeric key, not by appearance


def test_an_object_with_any_digit_key_is_the_answer() -> None:
    # int("note") fails, so every key is sorted as a string and every value taken.
    grade = grade_recall(EXPECTED, '{"1": 1781, "note": "x"}')
    assert grade.parse_ok and grade.answered == (1781, "x")
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (1, 4, 1, 0)
    assert not parse_recall_answer("[1781, 4725]").ok


def test_truncated_json_is_a_parse_failure() -> None:
    reply = '{"1": 1781, "2": 4725, "3": 33'
    parsed = parse_recall_answer(reply)
    assert not parsed.ok
    assert parsed.error
    grade = grade_recall(EXPECTED, reply)
    assert not grade.parse_ok
    assert grade.parse_error == parsed.error
    assert grade.accuracy is None and grade.edit_distance is None and grade.answered is None
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (None,) * 4


@pytest.mark.parametrize("reply", ["no numbers here", "```json\n```", "{}", "Sure: {}"])
def test_replies_without_json_fail_to_parse(reply: str) -> None:
    grade = grade_recall(EXPECTED, reply)
    assert grade.parse_ok is False and grade.parse_error


@pytest.mark.parametrize("reply", ["", "   \n"])
def test_an_empty_reply_is_neither_answered_nor_a_parse_failure(reply: str) -> None:
    grade = grade_recall(EXPECTED, reply)
    assert grade.parse_ok is None and grade.parse_error is None
    assert grade.uncounted and grade.accuracy is None


def test_fenced_empty_object_scores_zero() -> None:
    grade = grade_recall(EXPECTED, "```json\n{}\n```")
    assert grade.parse_ok
    assert grade.accuracy == 0.0
    assert grade.edit_distance == 5
    assert grade.missing == 5
    assert grade.answered == ()
    assert outcomes_of(EXPECTED, ()) == ["missing"] * 5


def test_bare_empty_object_in_prose_is_not_the_answer() -> None:
    assert not parse_recall_answer("Nothing found, so: {}").ok
    assert parse_recall_answer('Template {} then {"1": 1781}').values == (1781,)


def test_string_values_are_not_numbers() -> None:
    # The seed compared parsed JSON values with ==, so "1781" never matched 1781; its
    # published figures (gemini-2.5-pro, bytes_500389) depend on that.
    reply = '{"1": "1781", "2": "4725", "3": 3306, "4": 9012, "5": 5555}'
    grade = grade_recall(EXPECTED, reply)
    assert grade.answered == ("1781", "4725", 3306, 9012, 5555)
    assert grade.accuracy == pytest.approx(60.0)
    assert (grade.correct, grade.wrong) == (3, 2)
    assert hallucinations(EXPECTED, grade.answered) == [
        Hallucination(0, "1781", 0, 3),
        Hallucination(1, "4725", 0, 3),
    ]


def test_value_normalization() -> None:
    reply = (
        '{"1": 1781.0, "2": 4725.5, "3": true, "4": null, "5": [1, 2], "6": {"b": 1, "a": 2},'
        ' "7": NaN, "8": " 9012"}'
    )
    parsed = parse_recall_answer(reply)
    assert parsed.values == (
        1781,
        "4725.5",
        "true",
        "null",
        "[1,2]",
        '{"a":2,"b":1}',
        "NaN",
        " 9012",
    )
    assert canonical_value(True) == "true"
    assert canonical_value("0042") == "0042"


def test_one_character_string_is_not_its_code_point() -> None:
    # rapidfuzz compares a 1-character string element by its code point; chr(1781) == "۵".
    grade = grade_recall([1781], json.dumps({"1": chr(1781)}))
    assert grade.accuracy == 0.0
    assert lcs_anchors([1781], [chr(1781)]) == []


def test_key_counting() -> None:
    reply = '{"1": 1781, "2": 1111, "4": 9012, "7": 5555, "07": 4725}'
    grade = grade_recall(EXPECTED, reply)
    # Every key converts with int(): keys 1, 2, 4, 7, 7 in order, each looked up by
    # str(int(key)), so "07" reads key "7" again. Counts compare the sets of string keys.
    assert grade.answered == (1781, 1111, 9012, 5555, 5555)
    assert (grade.correct, grade.missing, grade.extra, grade.wrong) == (2, 2, 2, 1)


def test_keys_the_seed_reads_its_own_way() -> None:
    # "١" is a digit and int("١") == 1, but there is no key "1": not counted.
    arabic = grade_recall(EXPECTED, '{"١": 1781}')
    assert arabic.parse_ok and arabic.accuracy is None and arabic.uncounted
    # int("²") fails: the string order, its one value graded.
    assert grade_recall(EXPECTED, '{"²": 1781}').accuracy == pytest.approx(20.0)
    # " 1" is no digit key: the bare object is not the answer.
    assert not parse_recall_answer('{" 1": 1781}').ok
    # int() refuses 5,000 digits: the string order again.
    assert grade_recall(EXPECTED, '{"' + "1" * 5000 + '": 1781}').answered == (1781,)


def test_recall_accuracy_of_sequences() -> None:
    assert recall_accuracy([1, 2, 3, 4], [1, 2, 4]) == pytest.approx(75.0)
    assert recall_accuracy([], []) == 100.0
    assert recall_accuracy([1, 2], []) == 0.0


def test_lcs_tie_rule_prefers_stepping_back_in_the_answer() -> None:
    # Both [(0, 1)] and [(1, 0)] are longest; the seed's traceback keeps needle 2.
    assert lcs_anchors([1, 2], [2, 1]) == [(1, 0)]
    # A repeated answered value anchors on its last copy.
    assert lcs_anchors([7], [7, 7]) == [(0, 1)]
    assert lcs_anchors([7, 7], [7]) == [(1, 0)]
    assert lcs_anchors([], [1]) == []
    assert lcs_anchors([1], []) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param('{"1":' * 100_000, id="deeply-nested-objects"),
        pytest.param("{" * 500_000, id="braces"),
        pytest.param('{"1": ' + "[" * 100_000 + "]" * 100_000 + "}", id="deep-array"),
        pytest.param("```json\n" + '{"1": 1\n```json\n' * 50_000, id="looping-fences"),
        pytest.param(('{"1":[' + "0," * 2000) * 250, id="nested-long-arrays"),
        pytest.param('{"1": ' + "9" * 5000 + "}", id="huge-integer"),
        pytest.param("\x00\udcff\ufffd" * 100_000, id="binary-ish"),
    ],
)
def test_adversarial_replies_fail_cleanly(reply: str) -> None:
    grade = grade_recall(EXPECTED, reply)
    assert not grade.parse_ok
    assert grade.parse_error


def test_answer_after_degenerate_prefix_is_still_found() -> None:
    reply = 'x {"1": 1\n' * 2000 + as_reply(EXPECTED)
    assert grade_recall(EXPECTED, reply).accuracy == 100.0


# --------------------------------------------------------------------------- properties

needle_values = st.integers(min_value=1000, max_value=9999)
# A small alphabet forces repeated values, i.e. the LCS ties the seed's rule settles.
small_values = st.lists(st.integers(min_value=0, max_value=4), max_size=14)
# The seed's bare-object rule is blind to braces inside strings (a "{" in a value can hide the
# object), as its regular expression was: answered strings here hold no braces or fences.
plain_text = st.text(alphabet=st.characters(blacklist_characters="{}`"), max_size=5)
answer_values = st.lists(
    st.one_of(needle_values, plain_text, st.floats(allow_nan=True)), max_size=30
)


def seed_lcs_anchors(
    expected: Sequence[Hashable], answered: Sequence[Hashable]
) -> list[tuple[int, int]]:
    """The seed's textbook LCS table and traceback, as a reference."""
    n, m = len(expected), len(answered)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if expected[i - 1] == answered[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    pairs = []
    i, j = n, m
    while i > 0 and j > 0:
        if expected[i - 1] == answered[j - 1]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


@given(st.text())
def test_parse_and_grade_never_raise_on_text(reply: str) -> None:
    reading = read_reply(reply)
    grade = grade_recall(EXPECTED, reply)
    assert grade.parse_ok == reading.parse_ok
    assert (grade.parse_ok is False) == (grade.parse_error is not None)
    assert (grade.parse_ok is None) == (not reply.strip())


@given(st.binary().map(lambda b: b.decode("utf-8", "replace")))
def test_parse_and_grade_never_raise_on_decoded_bytes(reply: str) -> None:
    grade = grade_recall(EXPECTED, reply)
    assert (grade.parse_ok is False) == (grade.parse_error is not None)


@given(st.text(alphabet='{}[]":,0123456789 \n`jsonNaI-.e\\tru', max_size=80))
def test_parse_never_raises_on_json_like_text(reply: str) -> None:
    grade = grade_recall(EXPECTED, reply)
    if grade.parse_ok:
        assert grade.accuracy is not None and 0.0 <= grade.accuracy <= 100.0


@given(st.lists(needle_values, max_size=50), answer_values)
def test_accuracy_is_within_bounds(expected: list[int], answered: list[object]) -> None:
    grade = grade_recall(expected, as_reply(answered))
    assert grade.parse_ok
    assert grade.accuracy is not None and 0.0 <= grade.accuracy <= 100.0
    assert grade.edit_distance is not None
    assert grade.edit_distance <= max(len(expected), len(answered))


@given(st.lists(needle_values, max_size=60))
def test_perfect_answer_always_scores_100(expected: list[int]) -> None:
    body = json.dumps({str(i): v for i, v in enumerate(expected, start=1)})
    for reply in (as_reply(expected), f"```json\n{body}\n```"):
        grade = grade_recall(expected, reply)
        assert grade.accuracy == 100.0
        assert grade.correct == len(expected)
    assert all(o.outcome == "correct" for o in needle_outcomes(expected, expected))
    assert hallucinations(expected, expected) == []
    assert duplicates(expected, expected) == []


@given(st.lists(needle_values, max_size=40), answer_values)
def test_one_outcome_per_needle(expected: list[int], answered: list[object]) -> None:
    values = grade_recall(expected, as_reply(answered)).answered
    assert values is not None
    outcomes = needle_outcomes(expected, values)
    assert len(outcomes) == len(expected)
    assert [o.needle_index for o in outcomes] == list(range(1, len(expected) + 1))


@settings(max_examples=300)
@given(small_values, small_values)
def test_lcs_anchors_match_the_seed_traceback(expected: list[int], answered: list[int]) -> None:
    anchors = lcs_anchors(expected, answered)
    assert anchors == seed_lcs_anchors(expected, answered)
    assert len(anchors) == LCSseq.similarity(expected, answered)


@settings(max_examples=300)
@given(small_values, small_values)
def test_every_answered_value_is_accounted_for_once(
    expected: list[int], answered: list[int]
) -> None:
    anchors = lcs_anchors(expected, answered)
    outcomes = needle_outcomes(expected, answered, anchors)
    halluc = hallucinations(expected, answered, anchors)
    dups = duplicates(expected, answered, anchors)
    misorders = sum(o.outcome == "misorder" for o in outcomes)
    assert sum(o.in_lcs for o in outcomes) == len(anchors)
    assert len(anchors) + misorders + len(halluc) + len(dups) == len(answered)
    for value in set(expected):
        surplus = answered.count(value) - expected.count(value)
        assert sum(d.value == value for d in dups) == max(0, surplus)
    for h in halluc:
        assert h.value not in expected
        assert 0 <= h.key_from < h.key_to <= len(expected) + 1
