"""Grading throughput: needlescope's recall grader vs a straightforward pure-Python grader.

Real-looking 40-needle answers (drops, swaps, hallucinations, duplicates and broken JSON) graded
through ``needlescope.probes.recall.probe.grade_batch``, the sweep's grade task's function,
against a hand-written baseline checked to agree on the sample it is timed on
(``--baseline-sample``). Rates are by this process's CPU time, best of 3, wall-clock rates in
brackets. The method and the figures: bench/README.md.

Design: docs/design/benchmarks.md#bench-grading
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
from typing import Any

from needlescope.probes.recall.probe import grade_batch

N_ANSWERS = 100_000
NEEDLES = 40
BATCH = 32  # the sweep's default batch_size
BASELINE_SAMPLE = 10_000


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


BaselineResult = tuple[
    float, int, int, int, int, list[str], list[tuple[int, int, int, int]], list[tuple[int, int]]
]


def baseline_grade(expected: list[int], reply: str) -> BaselineResult | None:
    """What one would write by hand: json.loads, DP edit distance, DP LCS with traceback,
    then the same per-needle outcomes, hallucinations and duplicates (distinct needles)."""
    try:
        start, end = reply.index("{"), reply.rindex("}") + 1
        data = json.loads(reply[start:end])
        pairs = sorted((int(k), v) for k, v in data.items())
    except (ValueError, AttributeError):
        return None
    answered = [v for _, v in pairs]
    by_key = dict(pairs)
    n, m = len(expected), len(answered)
    previous = list(range(m + 1))
    for i in range(1, n + 1):
        current = [i] + [0] * m
        for j in range(1, m + 1):
            cost = 0 if expected[i - 1] == answered[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        previous = current
    accuracy = (1 - previous[m] / max(n, m, 1)) * 100
    correct = sum(1 for k, v in enumerate(expected, 1) if k in by_key and by_key[k] == v)
    missing = sum(1 for k in range(1, n + 1) if k not in by_key)
    extra = sum(1 for k in by_key if not 1 <= k <= n)

    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if expected[i - 1] == answered[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    needle_of = {}  # answer index -> 1-based needle it anchors
    i, j = n, m
    while i and j:
        if expected[i - 1] == answered[j - 1]:
            needle_of[j - 1] = i
            i, j = i - 1, j - 1
        elif table[i][j - 1] >= table[i - 1][j]:
            j -= 1
        else:
            i -= 1

    outcomes = ["missing"] * n
    for needle in needle_of.values():
        outcomes[needle - 1] = "correct"
    halluc: list[tuple[int, int, int, int]] = []
    dups: list[tuple[int, int]] = []
    pending: list[int] = []
    key_from = 0
    for index, value in enumerate(answered):
        if index in needle_of:
            halluc.extend((p, answered[p], key_from, needle_of[index]) for p in pending)
            pending = []
            key_from = needle_of[index]
        elif value in expected:
            needle = expected.index(value)
            if outcomes[needle] == "missing":
                outcomes[needle] = "misorder"
            else:
                dups.append((index, needle + 1))
        else:
            pending.append(index)
    halluc.extend((p, answered[p], key_from, n + 1) for p in pending)
    return accuracy, previous[m], correct, missing, extra, outcomes, halluc, dups


def needlescope_grade(cases: list[tuple[list[int], str]], keep: bool = False) -> list[Any]:
    """Grade every case the way the sweep does: grade_batch on each batch of replies (the
    sweep persists a batch's rows, then drops them; ``keep`` keeps them for the check)."""
    facts: list[dict[str, Any]] = [{}] * BATCH
    graded = []
    for start in range(0, len(cases), BATCH):
        chunk = cases[start : start + BATCH]
        batch = grade_batch([e for e, _ in chunk], facts[: len(chunk)], [r for _, r in chunk])
        if keep:
            graded.append(batch)
    return graded


def baseline_all(
    cases: list[tuple[list[int], str]], keep: bool = False
) -> list[BaselineResult | None]:
    results = []
    for expected, reply in cases:
        result = baseline_grade(expected, reply)
        if keep:
            results.append(result)
    return results


def check_agreement(
    cases: list[tuple[list[int], str]], graded: list[Any], baseline: list[BaselineResult | None]
) -> None:
    """The baseline and needlescope agree on every answer of the sample."""
    for start in range(0, len(cases), BATCH):
        batch = graded[start // BATCH]
        tables = batch.tables
        for offset, (_, reply) in enumerate(cases[start : start + BATCH]):
            ours = batch.grades[offset]
            theirs = baseline[start + offset]
            if theirs is None or not ours.parse_ok:
                assert theirs is None and not ours.parse_ok, reply
                continue
            accuracy, distance, correct, missing, extra, outcomes, halluc, dups = theirs
            figures = ours.figures
            assert abs(ours.accuracy - accuracy) < 1e-9, reply
            assert (distance, correct, missing, extra) == (
                figures["edit_distance"],
                figures["correct"],
                figures["missing"],
                figures["extra"],
            ), reply
            needles = tables["needle_outcomes"]
            rows = [i for i, a in enumerate(needles["answer"]) if a == offset]
            assert [needles["outcome"][i] for i in rows] == outcomes, reply
            h = tables["hallucinations"]
            assert [
                (h["answer_index"][i], int(h["value"][i]), h["key_from"][i], h["key_to"][i])
                for i, a in enumerate(h["answer"])
                if a == offset
            ] == halluc, reply
            d = tables["duplicates"]
            assert [
                (d["answer_index"][i], json.loads(d["needle_indices"][i])[0])
                for i, a in enumerate(d["answer"])
                if a == offset
            ] == dups, reply


def timed(repeat: int, function: Any, *args: Any) -> tuple[float, float]:
    """Best CPU time and best wall time of ``repeat`` runs. CPU time is this process's:
    the machine may be shared, and both graders run on one core."""
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        function(*args)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return best_cpu, best_wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=N_ANSWERS)
    parser.add_argument("--baseline-sample", type=int, default=BASELINE_SAMPLE)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs, for both")
    args = parser.parse_args()

    rng = random.Random(1)
    cases = []
    for _ in range(args.answers):
        expected = rng.sample(range(1000, 10000), NEEDLES)
        cases.append((expected, make_answer(rng, expected)))
    sample = cases[: min(args.baseline_sample, len(cases))]

    ours, ours_wall = timed(args.repeat, needlescope_grade, cases)
    baseline, baseline_wall = timed(args.repeat, baseline_all, sample)
    check_agreement(sample, needlescope_grade(sample, keep=True), baseline_all(sample, keep=True))

    ours_rate, baseline_rate = len(cases) / ours, len(sample) / baseline
    print(
        f"answers: {len(cases):,} × {NEEDLES} needles (parse + figures + per-needle outcomes"
        " + hallucinations + duplicates); rates by CPU time, best of"
        f" {args.repeat} (wall time in brackets)"
    )
    print(
        f"needlescope (probes.recall.grade_batch, batches of {BATCH}): {ours_rate:,.0f}"
        f" answers/s ({ours:.2f} s CPU) [wall {len(cases) / ours_wall:,.0f}/s]"
    )
    print(
        f"pure-Python baseline on the first {len(sample):,} answers: {baseline_rate:,.0f}"
        f" answers/s ({baseline:.2f} s CPU) [wall {len(sample) / baseline_wall:,.0f}/s];"
        " it agrees with needlescope on every one"
    )
    print(
        f"speed-up: {ours_rate / baseline_rate:.1f}× "
        f"[wall {len(cases) / ours_wall / (len(sample) / baseline_wall):.1f}×]"
    )


if __name__ == "__main__":
    main()
