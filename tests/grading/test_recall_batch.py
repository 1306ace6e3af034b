"""The fast paths of the recall grader agree with the seed's rules (needlescope.grading.recall).

The batch grader reads flat objects with orjson, runs the LCS in rapidfuzz and corrects its
traceback to the seed's; these properties pin all of that to the textbook reference.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlescope.grading.recall import (
    duplicates,
    grade_recall,
    grade_recall_batch,
    hallucinations,
    lcs_anchors,
    needle_outcomes,
    read_reply,
)
from needlescope.probes.recall import probe as recall_probe
from tests.grading.test_recall_grading import seed_lcs_anchors

distinct_needles = st.lists(st.integers(0, 20), max_size=12, unique=True)
# Mostly expected values (so repeats and reorderings), some others, a few non-ints.
answered_values = st.lists(
    st.one_of(
        st.integers(0, 24),
        st.integers(0, 24),
        st.sampled_from(["7", "x", True, 3.0, 2.5, None, -1, 2**61 + 1, 2**64 + 3]),
    ),
    max_size=16,
)


def reference(expected: Sequence[Hashable], answered: Sequence[Hashable]) -> tuple[Any, ...]:
    anchors = seed_lcs_anchors(expected, answered)
    return (
        [tuple(o) for o in needle_outcomes(expected, answered, anchors)],
        [tuple(h) for h in hallucinations(expected, answered, anchors)],
        [tuple(d) for d in duplicates(expected, answered, anchors)],
    )


def batch_rows(batch: Any, columns: Any, answer: int) -> list[tuple[Any, ...]]:
    names = [n for n in columns.__slots__ if n != "answer"]
    return [
        tuple(getattr(columns, n)[i] for n in names)
        for i, a in enumerate(columns.answer)
        if a == answer
    ]


@settings(max_examples=400)
@given(distinct_needles, st.lists(st.integers(0, 24), max_size=16))
def test_fast_lcs_is_the_seed_traceback(expected: list[int], answered: list[int]) -> None:
    # Distinct needles, repeated answers: the rapidfuzz path with its corrections.
    assert lcs_anchors(expected, answered) == seed_lcs_anchors(expected, answered)


@settings(max_examples=400)
@given(
    st.one_of(distinct_needles, st.lists(st.integers(0, 5), max_size=8)),
    answered_values,
    st.sampled_from(["plain", "fenced", "gap-key", "shuffled"]),
)
def test_batch_matches_the_reference(
    expected: list[int], answered: list[object], layout: str
) -> None:
    keys = [str(i) for i in range(1, len(answered) + 1)]
    if layout == "gap-key" and keys:
        keys[-1] = str(len(keys) + 3)
    if layout == "shuffled":
        keys.reverse()
    body = json.dumps(dict(zip(keys, answered, strict=True)))
    # An empty object is the answer only in a fence (a bare one has no digit key).
    fenced = layout == "fenced" or not answered
    reply = f"Sure:\n```json\n{body}\n```" if fenced else body
    batch = grade_recall_batch([expected, tuple(expected)], [reply, reply])
    single = grade_recall(expected, reply)
    assert repr(batch.grade(0)) == repr(single) == repr(batch.grade(1))
    assert single.answered is not None
    outcomes, halls, dups = reference(expected, single.answered)
    for answer in (0, 1):
        assert batch_rows(batch, batch.needles, answer) == outcomes
        assert batch_rows(batch, batch.hallucinations, answer) == halls
        assert batch_rows(batch, batch.duplicates, answer) == dups


@pytest.mark.parametrize(
    ("reply", "values"),
    [
        ('{"1": 99999999999999999999, "2": 5}', (99999999999999999999, 5)),  # orjson: a float
        ('{"1": NaN, "2": 5}', ("NaN", 5)),
        ('{"1": 1e400}', ("Infinity",)),
        ('{"1": "\\ud800"}', ("\ud800",)),
        ('{"1": true, "2": 1.0, "3": [1], "4": null}', ("true", 1, "[1]", "null")),
        ('{"2": 5, "1": 4}', (4, 5)),
        ('{"1": 4, "01": 5}', (4, 4)),
        ('{"1": 4, "1": 6}', (6,)),
        ("```json\n{}\n```", ()),
    ],
)
def test_values_are_what_json_reads(reply: str, values: tuple[object, ...]) -> None:
    assert tuple(read_reply(reply).values or ()) == values
    batch = grade_recall_batch([[4, 5]], [reply])
    assert tuple(batch.grade(0).answered or ()) == values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(distinct_needles, answered_values), max_size=6))
def test_probe_batch_matches_per_reply_grades(cases: list[tuple[list[int], list[object]]]) -> None:
    replies = [
        json.dumps({str(i): v for i, v in enumerate(a, start=1)}) if a else "```json\n{}\n```"
        for _, a in cases
    ]
    expected = [e for e, _ in cases]
    graded = recall_probe.grade_batch(expected, [{}] * len(cases), replies)
    for answer, (needles, reply) in enumerate(zip(expected, replies, strict=True)):
        one = recall_probe.grade(needles, {}, reply)
        many = graded.grades[answer]
        assert (many.parse_ok, many.accuracy, many.answered, dict(many.figures)) == (
            one.parse_ok,
            one.accuracy,
            one.answered,
            dict(one.figures),
        )
        rows = {
            table: [
                {k: v[i] for k, v in columns.items() if k != "answer"}
                for i, a in enumerate(columns["answer"])
                if a == answer
            ]
            for table, columns in graded.tables.items()
        }
        assert rows["needle_outcomes"] == [
            {"needle_index": n.needle_index, "expected": n.expected, "in_lcs": n.in_lcs}
            | {"outcome": n.outcome}
            for n in one.needles
        ]
        assert rows["hallucinations"] == list(one.tables.get("hallucinations", ()))
        assert rows["duplicates"] == list(one.tables.get("duplicates", ()))
