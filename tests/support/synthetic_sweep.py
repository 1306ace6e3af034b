"""A small warehouse of real recall contexts and synthetic answers, two models × two epochs.

The prompts are built by needlescope's own core (``build_context`` with a character
measure), so every cell row can be rebuilt exactly (the drill-down shows each needle's
haystack); the answers are made up and graded by needlescope's grader. Model ``beta``
drops in the second epoch (drift); one reply carries HTML that must be shown as text, one
is longer than the drill-down keeps, and one does not parse.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from needlescope.cells import Cell, expand_grid
from needlescope.config import SweepConfig, parse_config
from needlescope.fillers import filler_from_spec
from needlescope.grading import grade_recall
from needlescope.probes import recall
from needlescope.probes.base import Context
from needlescope.probes.build import build_context
from needlescope.warehouse.rows import analysis_rows, cell_row
from needlescope.warehouse.store import Warehouse

T0 = datetime(2026, 4, 1, 3, 0, tzinfo=UTC)
EPOCHS = ("drill-2026-04-01", "drill-2026-04-02")
MODELS = ("alpha", "beta")
INJECTED = '<img src="x" onerror="window.__injected = 1"></script><b>bold</b> '
CONFIG: dict[str, Any] = {
    "name": "drill",
    "seed": 13,
    "models": [{"name": m, "provider": "local"} for m in MODELS],
    "probes": [
        {
            "probe": "recall",
            "lengths": [600, 1500],
            "length_unit": "chars",
            "needle_counts": [3, 6],
            "fillers": ["pattern", "prose-en"],
            "repeats": 2,
        }
    ],
}


@dataclass(frozen=True)
class Built:
    store: Warehouse
    config: SweepConfig
    contexts: dict[str, Context]  # by cell id
    replies: dict[tuple[str, str], str]  # (epoch, cell id): the reply


async def _measure(text: str) -> int:
    return len(text)


def build_contexts(config: SweepConfig) -> dict[str, Context]:
    async def build(cell: Cell) -> Context:
        spec = config.filler_spec(cell.filler)
        return await build_context(recall, cell, filler_from_spec(spec), spec.kind, _measure)

    async def build_all() -> list[Context]:
        return [await build(cell) for cell in expand_grid(config)]

    return {c.cell.cell_id: c for c in asyncio.run(build_all())}


def _reply(expected: list[int], recall_rate: float, rng: random.Random) -> str:
    answered = [v for v in expected if rng.random() < recall_rate]
    if rng.random() < 0.2:
        answered.insert(rng.randrange(len(answered) + 1), rng.randint(1000, 9999))
    return json.dumps({str(i): v for i, v in enumerate(answered, start=1)})


def build_warehouse(root: Path, seed: int = 3) -> Built:
    store = Warehouse(root).ensure()
    config = parse_config(CONFIG, "drill.yaml")
    contexts = build_contexts(config)
    rng = random.Random(seed)
    tables: dict[str, list[dict[str, Any]]] = {
        name: [] for name in ("cells", "answers", "needle_outcomes", "hallucinations", "runs")
    }
    replies: dict[tuple[str, str], str] = {}
    for day, epoch in enumerate(EPOCHS):
        run_id = f"run-{epoch}"
        at = T0 + timedelta(days=day)
        common = {"run_id": run_id, "epoch": epoch, "config_name": "drill"}
        tables["runs"].append(
            common
            | {
                "event": "start",
                "at": at,
                "config_json": config.model_dump_json(),
                "needlescope_version": "0.1.0",
                "cells_total": len(contexts),
            }
        )
        for index, (cell_id, context) in enumerate(contexts.items()):
            cell = context.cell
            at += timedelta(seconds=1)
            tables["cells"].append(
                cell_row(
                    context,
                    run_id,
                    haystack_length=len(context.haystack_text),
                    planned_tokens=None,
                    keep_prompt=False,
                    length_basis="chars",
                )
            )
            expected = list(context.expected)
            rate = 0.97 if cell.model == "alpha" else (0.8 if day == 0 else 0.35)
            reply = _reply(expected, rate - 0.0001 * cell.length, rng)
            if index == 0:
                reply = INJECTED + reply  # HTML in a reply: text on the page, never markup
            elif index == 1:
                reply = reply + " " + "padding " * 800  # longer than the drill-down keeps
            elif index == 2 and day == 1:
                reply = "I could not find any numbers."
            replies[(epoch, cell_id)] = reply
            grade = grade_recall(expected, reply)
            tables["answers"].append(
                {
                    "run_id": run_id,
                    "epoch": epoch,
                    "cell_id": cell_id,
                    "model": cell.model,
                    "probe": "recall",
                    "answered_at": at,
                    "attempts": 1,
                    "response": reply,
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
                    "finish_reason": "stop",
                    "latency_s": 0.5,
                }
            )
            outcomes, invented, _ = analysis_rows(
                expected, grade, run_id, epoch, cell_id, cell.model, "recall"
            )
            tables["needle_outcomes"] += outcomes
            tables["hallucinations"] += invented
        tables["runs"].append(
            common | {"event": "end", "at": at, "cells_graded": len(contexts), "cells_failed": 0}
        )
    for name, rows in tables.items():
        store.append(name, rows)
    return Built(store, config, contexts, replies)
