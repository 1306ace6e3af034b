"""Grading throughput: needlescope's recall grader vs a straightforward pure-Python grader.

Real-looking 40-needle answers: drops, swaps, hallucinations, duplicates and broken JSON.
"""

from __future__ import annotations

import json
import random
import time

from needlescope.grading import grade_recall, lcs_anchors, needle_outcomes

N_ANSWERS = 20_000
NEEDLES = 40


def make_answer(rng: random.Random, expected: list[int]) -> str:
    answered = list(expected)
    for _ in range(rng.randint(0, 6)):
        kind = rng.random()
        if kind < 0.3 and answered:
            answered.pop(rng.randrange(len(answered)))
        elif kind < 0.5 and len(answered) > 1:
            i = rng.randrange(len(answered) - 1)
            answered[i], answered[i + 1] = answered[i + 1], answered[i]
        elif kind < 0.8:
            answered.insert(rng.randrange(len(answered) + 1), rng.randint(1000, 9999))
        elif answered:
            answered.insert(rng.randrange(len(answered) + 1), rng.choice(answered))
    text = json.dumps({str(i + 1): v for i, v in enumerate(answered)}, indent=1)
    if rng.random() < 0.05:
        text = text[: len(text) // 2]  # cut off: a parse failure
    elif rng.random() < 0.3:
        text = f"Here are the numbers:\n```json\n{text}\n```"
    return text


def baseline_grade(expected: list[int], reply: str) -> tuple[float, list[bool]] | None:
    """What one would write by hand: json.loads, DP edit distance, DP LCS with traceback."""
    try:
        start, end = reply.index("{"), reply.rindex("}") + 1
        data = json.loads(reply[start:end])
        answered = [v for _, v in sorted(((int(k), v) for k, v in data.items()))]
    except (ValueError, AttributeError):
        return None
    n, m = len(expected), len(answered)
    previous = list(range(m + 1))
    for i in range(1, n + 1):
        current = [i] + [0] * m
        for j in range(1, m + 1):
            cost = 0 if expected[i - 1] == answered[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        previous = current
    accuracy = (1 - previous[m] / max(n, m, 1)) * 100
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if expected[i - 1] == answered[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    matched = [False] * n
    i, j = n, m
    while i and j:
        if expected[i - 1] == answered[j - 1]:
            matched[i - 1] = True
            i, j = i - 1, j - 1
        elif table[i][j - 1] >= table[i - 1][j]:
            j -= 1
        else:
            i -= 1
    return accuracy, matched


def main() -> None:
    rng = random.Random(1)
    cases = []
    for _ in range(N_ANSWERS):
        expected = rng.sample(range(1000, 10000), NEEDLES)
        cases.append((expected, make_answer(rng, expected)))

    start = time.perf_counter()
    for expected, reply in cases:
        grade = grade_recall(expected, reply)
        if grade.answered is not None:
            answered = list(grade.answered)
            needle_outcomes(expected, answered, lcs_anchors(expected, answered))
    ours = time.perf_counter() - start

    start = time.perf_counter()
    for expected, reply in cases:
        baseline_grade(expected, reply)
    baseline = time.perf_counter() - start

    print(f"answers: {N_ANSWERS} × {NEEDLES} needles (grade + per-needle outcomes)")
    print(f"needlescope: {N_ANSWERS / ours:,.0f} answers/s")
    print(f"pure-Python baseline: {N_ANSWERS / baseline:,.0f} answers/s")
    print(f"speed-up: {baseline / ours:.1f}×")


if __name__ == "__main__":
    main()
