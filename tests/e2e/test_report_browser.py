"""The HTML report in a real browser: every chart draws, offline, without a console error.

The warehouses are built here from synthetic answers graded by needlescope itself: several
models, lengths, needle counts and fillers (one model flattered by the `a|` pattern, one
whose repeats disagree like a routed model, one that stops producing JSON at length), and
the demo's degenerate case where no answer parses.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from needlescope.grading.recall import grade_recall
from needlescope.provenance._hashing import short_hash
from needlescope.warehouse.report.page import write_report
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import analysis_rows
from tests.support.browser import PageReport, find_chromium, inspect_file

# `make test` installs Debian's chromium; in CI its absence is a failure, not a skip.
pytestmark = pytest.mark.skipif(
    find_chromium() is None and not os.environ.get("CI"),
    reason="needs Chromium: `make browser` (apt-get install chromium)",
)

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
RECALL_CHARTS = (
    "accuracy_by_length",
    "accuracy_by_filler",
    "parse_failures_by_length",
    "position_accuracy",
    "missing_by_position",
    "misorder_by_position",
    "hallucinations_by_interval",
)


@dataclass(frozen=True)
class Profile:
    """How a synthetic model answers: recall falls with length, worst in the middle."""

    name: str
    recall_at_1k: float
    decay: float  # recall lost per doubling of the length
    pattern_bonus: float = 0.0  # recall gained on the `a|` pattern filler
    routed: bool = False  # each answer either perfect or poor, at random
    parse_failure_at_32k: float = 0.0


PROFILES = (
    Profile("alpha-large", 0.99, 0.02),
    Profile("beta-mini", 0.9, 0.12, parse_failure_at_32k=0.6),
    Profile("gamma-routed", 0.9, 0.03, routed=True),
    Profile("delta-pattern-lover", 0.75, 0.1, pattern_bonus=0.5),
)


def synthetic_answer(
    expected: Sequence[int], profile: Profile, length: int, filler: str, rng: random.Random
) -> str:
    doublings = max(0.0, (length / 1000) ** 0.5 - 1)
    recall = profile.recall_at_1k - profile.decay * doublings
    if filler == "pattern":
        recall += profile.pattern_bonus
    if profile.routed:
        recall = 1.0 if rng.random() < 0.5 else 0.2
    failure = profile.parse_failure_at_32k * min(1.0, length / 32000) ** 2
    if rng.random() < failure:
        return rng.choice(["I could not find any numbers.", '{"1": 12', "Sure! Here they are: "])
    answered: list[int] = []
    n = len(expected)
    for index, value in enumerate(expected):
        middle = 1 - abs(index - (n - 1) / 2) / max((n - 1) / 2, 1)  # 1 mid, 0 at the ends
        if rng.random() < min(1.0, recall + 0.05 - 0.15 * middle * (1 - recall)):
            answered.append(value)
        if rng.random() < (1 - recall) * 0.15:
            answered.append(rng.randint(1000, 9999))  # hallucinated
    for _ in range(int((1 - recall) * n * 0.1)):
        if len(answered) > 2:
            i = rng.randrange(len(answered) - 1)
            answered[i], answered[i + 1] = answered[i + 1], answered[i]
    if answered and rng.random() < 0.05:
        answered.append(answered[0])  # a duplicate
    return json.dumps({str(i): v for i, v in enumerate(answered, start=1)})


def build_warehouse(
    root: Path,
    profiles: Iterable[Profile] = PROFILES,
    lengths: Sequence[int] = (1000, 2000, 4000, 8000, 16000, 32000),
    needle_counts: Sequence[int] = (10, 40),
    fillers: Sequence[str] = ("pattern", "prose-en"),
    repeats: int = 3,
    seed: int = 5,
    only_parse_failures: bool = False,
) -> Warehouse:
    """A warehouse of graded synthetic answers, written with the real row builders."""
    store = Warehouse(root).ensure()
    rng = random.Random(seed)
    run_id, epoch = "run-synthetic", "synthetic-2026-03-01"
    tables: dict[str, list[dict[str, Any]]] = {
        name: [] for name in ("cells", "answers", "needle_outcomes", "hallucinations", "duplicates")
    }
    at = T0
    for profile in profiles:
        grid = [
            (length, count, filler, r)
            for length in lengths
            for count in needle_counts
            for filler in fillers
            for r in range(repeats)
        ]
        for length, count, filler, repeat in grid:
            at += timedelta(seconds=1)
            key = [profile.name, length, count, filler, repeat]
            cell_id, context_id = short_hash(key), short_hash(key[1:])
            expected = [rng.randint(1000, 9999) for _ in range(count)]
            tables["cells"].append(
                {
                    "cell_id": cell_id,
                    "context_id": context_id,
                    "run_id": run_id,
                    "created_at": at,
                    "model": profile.name,
                    "probe": "recall",
                    "filler": filler,
                    "placement": "even",
                    "region": "whole",
                    "prompt_version": "recall-en-v1",
                    "seed": seed,
                    "length": length,
                    "length_unit": "tokens",
                    "needle_count": count,
                    "repeat": repeat,
                    "expected": json.dumps(expected),
                }
            )
            base = {"run_id": run_id, "epoch": epoch, "cell_id": cell_id, "answered_at": at}
            base |= {"model": profile.name, "probe": "recall", "attempts": 1}
            if profile.name == "beta-mini" and (length, count, filler, repeat) == grid[-1]:
                tables["answers"].append(
                    base | {"response_kept": False, "error_kind": "timeout", "error": "slow"}
                )
                continue
            response = (
                "no JSON here"
                if only_parse_failures
                else synthetic_answer(expected, profile, length, filler, rng)
            )
            grade = grade_recall(expected, response)
            tables["answers"].append(
                base
                | {
                    "response": response,
                    "response_kept": True,
                    "parse_ok": grade.parse_ok,
                    "parse_error": grade.parse_error,
                    "accuracy": grade.accuracy,
                    "edit_distance": grade.edit_distance,
                    "correct": grade.correct,
                    "missing": grade.missing,
                    "extra": grade.extra,
                    "wrong": grade.wrong,
                    "answered": None if grade.answered is None else json.dumps(grade.answered),
                    "prompt_tokens": length,
                    "completion_tokens": 20 + 6 * count,
                    "finish_reason": "stop",
                    "latency_s": 0.5 + length / 8000 + rng.random(),
                }
            )
            outcomes, invented, copies = analysis_rows(
                expected, grade, run_id, epoch, cell_id, profile.name, "recall"
            )
            tables["needle_outcomes"] += outcomes
            tables["hallucinations"] += invented
            tables["duplicates"] += copies
    for name, rows in tables.items():
        store.append(name, rows)
    cells = len(tables["cells"])
    common = {"run_id": run_id, "epoch": epoch, "config_name": "synthetic", "cells_total": cells}
    store.append(
        "runs",
        [
            common | {"event": "start", "at": T0, "needlescope_version": "0.1.0"},
            common | {"event": "end", "at": at, "cells_graded": cells - 1, "cells_failed": 1},
        ],
    )
    return store


def _report(tmp_path_factory: pytest.TempPathFactory, name: str, **options: Any) -> Path:
    base = tmp_path_factory.mktemp(name)
    build_warehouse(base / "wh", **options)
    return write_report(base / "wh", base / "report")


@pytest.fixture(scope="module")
def multi_model_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(tmp_path_factory, "multi")


@pytest.fixture(scope="module")
def parse_failures_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(
        tmp_path_factory,
        "degenerate",
        profiles=[Profile("smollm2-135m", 0.1, 0.0)],
        lengths=(256, 512, 1024),
        needle_counts=(1, 3, 5),
        repeats=2,
        only_parse_failures=True,
    )


def chart_ids(page: Path) -> list[str]:
    return re.findall(r"<div class='vega' id='([^']+)'>", page.read_text(encoding="utf-8"))


def chart_lines(page: Path) -> dict[str, str]:
    """The charts with nothing to draw: each is one line saying why (issue 20), by id."""
    found = re.findall(
        r"<p class='muted chart-empty' id='([^']+)'>([^<]+)</p>", page.read_text(encoding="utf-8")
    )
    return dict(found)


def assert_all_drawn(page: PageReport, expected: Sequence[str]) -> None:
    problems = page.problems(expected)
    problems += [f"console warning: {w}" for w in page.console_warnings]
    assert not problems, "\n".join(problems)


def test_every_chart_draws_in_a_multi_model_report(multi_model_report: Path) -> None:
    names = chart_ids(multi_model_report)
    assert set(RECALL_CHARTS) | {"accuracy_by_length_by_filler"} <= set(names)
    page = inspect_file(multi_model_report)
    assert_all_drawn(page, names)
    assert [chart["id"] for chart in page.charts] == names
    heatmap = next(c for c in page.charts if c["id"] == "position_accuracy")
    assert heatmap["marks"] >= 4 * 6 * (10 + 40)  # a cell per model × length × needle


def test_every_chart_draws_when_no_answer_parsed(parse_failures_report: Path) -> None:
    names = chart_ids(parse_failures_report)
    empty = chart_lines(parse_failures_report)  # nothing to draw: one line saying why
    assert set(RECALL_CHARTS) <= set(names) | set(empty)
    assert "No parsed answers" in empty["position_accuracy"]
    page = inspect_file(parse_failures_report)
    assert_all_drawn(page, names)
    text = {chart["id"]: chart["text"] for chart in page.charts}
    assert "100%" in text["parse_failures_by_length"]


def test_an_empty_warehouse_gives_a_page_that_loads(tmp_path: Path) -> None:
    Warehouse(tmp_path / "wh").ensure()
    page = inspect_file(write_report(tmp_path / "wh", tmp_path / "report"), selector="body")
    assert page.ready and not page.console_errors and not page.exceptions


@pytest.mark.parametrize(
    "breakage",
    [
        # An invalid spec: vega-embed rejects it.
        'specs["position_accuracy"] = {"mark": "no-such-mark", "data": {"values": [{}]}};',
        # A spec that is valid but draws nothing.
        'specs["missing_by_position"] = {"mark": "rect", "data": {"values": []}};',
        # A field the data does not have: drawn, but at "undefined".
        'specs["accuracy_by_filler"] = {"mark": "bar", "data": {"values": [{"a": 1}]}, '
        '"encoding": {"x": {"field": "nope", "type": "nominal"}, '
        '"y": {"field": "a", "type": "quantitative"}}};',
        # A script error before any chart is drawn.
        "undefinedFunction();",
    ],
    ids=["invalid-spec", "no-marks", "missing-field", "script-error"],
)
def test_the_check_catches_a_broken_chart(
    multi_model_report: Path, tmp_path: Path, breakage: str
) -> None:
    page = multi_model_report.read_text(encoding="utf-8")
    broken = tmp_path / "report.html"
    broken.write_text(page.replace("const drawn = ", f"{breakage}\nconst drawn = ", 1), "utf-8")
    problems = inspect_file(broken, timeout_s=15).problems(chart_ids(multi_model_report))
    assert problems
