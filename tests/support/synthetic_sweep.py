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

from needlescope.config._sweep import SweepConfig, parse_config
from needlescope.grading import _judge as judge
from needlescope.grading.recall import grade_recall
from needlescope.grid._cells import Cell
from needlescope.haystack._fillers import filler_from_spec
from needlescope.probes.base import Context, Grade, answer_tables
from needlescope.probes.build import build_context
from needlescope.probes.cases import probe as cases
from needlescope.probes.counting_stars import probe as counting_stars
from needlescope.probes.rag import probe as rag
from needlescope.probes.recall import probe as recall
from needlescope.probes.registry import expand_grid, probe_module
from needlescope.warehouse.store import Warehouse
from needlescope.warehouse.store.rows import AnswerKey, analysis_rows, cell_row, table_rows

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


def _start_row(
    run_id: str, epoch: str, config: SweepConfig, at: datetime, cells: int
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "epoch": epoch,
        "config_name": config.name,
        "event": "start",
        "at": at,
        "config_json": config.model_dump_json(),
        "needlescope_version": "0.1.0",
        "cells_total": cells,
    }


def _cell_row(context: Context, run_id: str) -> dict[str, Any]:
    return cell_row(
        context,
        run_id,
        haystack_length=len(context.haystack_text),
        planned_tokens=None,
        keep_prompt=False,
        length_basis="chars",
    )


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
        tables["runs"].append(_start_row(run_id, epoch, config, at, len(contexts)))
        for index, (cell_id, context) in enumerate(contexts.items()):
            cell = context.cell
            at += timedelta(seconds=1)
            tables["cells"].append(_cell_row(context, run_id))
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


# ----------------------------------------------------------------------------- other probes
# Counting-Stars, needle cases and their RAG twins: one epoch of two models, built by the
# probes themselves (RAG with a word-count embedder), graded by the probes' own graders.

PROBES_EPOCH = "probes-2026-04-03"
CASES_FILE = Path(__file__).resolve().parents[2] / "configs" / "cases" / "en.yaml"
PROBES_CONFIG: dict[str, Any] = {
    "name": "probes",
    "seed": 17,
    "models": [{"name": m, "provider": "local"} for m in MODELS],
    "probes": [
        {
            "probe": "counting_stars",
            "stars": 4,
            "lengths": [1200, 2400],
            "length_unit": "chars",
            "orders": ["ordered", "shuffled"],
            "repeats": 2,
        },
        {
            "probe": "cases",
            "cases_file": str(CASES_FILE),
            "cases": ["plum_cake_secrets", "lighthouse_colour"],
            "lengths": [1500, 3000],
            "length_unit": "chars",
            "depth_count": 4,  # 0, 33.333, 66.667, 100: depths that are not whole numbers
        },
        {
            "probe": "rag",
            "cases_file": str(CASES_FILE),
            "cases": ["plum_cake_secrets", "lighthouse_colour"],
            "lengths": [1500, 3000],
            "length_unit": "chars",
            "depth_count": 4,
            "chunk_size": 300,
            "top_k": 2,
        },
    ],
}
_EMBED_WORDS = ("cardamom", "hazelnut", "elderflower", "secret", "ingredient", "lighthouse")


async def _embed(texts: list[str]) -> list[list[float]]:
    return [[float(t.lower().count(w)) for w in _EMBED_WORDS] + [0.05] for t in texts]


def build_probe_contexts(config: SweepConfig) -> dict[str, Context]:
    async def build(cell: Cell) -> Context:
        spec = config.filler_spec(cell.filler)
        filler = filler_from_spec(spec)
        if cell.probe == "rag":
            return await rag.retrieve(cell, filler, spec.kind, _embed, _measure)
        module = counting_stars if cell.probe == "counting_stars" else cases
        return await build_context(module, cell, filler, spec.kind, _measure)

    async def build_all() -> list[Context]:
        return [await build(cell) for cell in expand_grid(config)]

    return {c.cell.cell_id: c for c in asyncio.run(build_all())}


def stars_reply(context: Context, rng: random.Random) -> str:
    """alpha lists every count; beta forgets the last ones, and at 2400 chars loses count."""
    counts = list(context.expected)
    if context.cell.model == "alpha":
        return json.dumps({"little_penguin": rng.sample(counts, len(counts))})
    if context.cell.length == 2400 and context.cell.repeat == 1:
        return "I lost count of the stars, sorry."
    return json.dumps({"little_penguin": counts[:2]})


def cases_reply(context: Context) -> str:
    """RAG finds everything; the LLM's recall fades with depth (and is worse for beta)."""
    expected = context.expected
    depth = context.cell.depth or 0.0
    if context.cell.probe == "rag" or depth == 0:
        return f"{expected['true_answer']} (depth {depth:g})"
    if depth < 50 and context.cell.model == "alpha":
        return f"It mentions: {expected['needles'][0]}"
    return "I do not know."


def _probe_answer(
    context: Context, reply: str, run_id: str, at: datetime
) -> tuple[dict[str, Any], Grade]:
    cell = context.cell
    grade = probe_module(cell.probe).grade(context.expected, context.rendered.facts, reply)
    detail = dict(grade.detail)
    if cell.probe in ("cases", "rag") and cell.model == "alpha":  # judged: alpha only
        score = 9 if grade.accuracy == 100 else 2
        verdict = judge.parse_verdict(json.dumps({"score": score, "reason": f"judged {score}"}))
        detail |= judge.judge_record(verdict, model="judge", keyword_accuracy=grade.accuracy)
    return {
        "run_id": run_id,
        "epoch": PROBES_EPOCH,
        "cell_id": cell.cell_id,
        "model": cell.model,
        "probe": cell.probe,
        "answered_at": at,
        "attempts": 1,
        "response": reply,
        "response_kept": True,
        "parse_ok": grade.parse_ok,
        "parse_error": grade.parse_error,
        "accuracy": grade.accuracy,
        **grade.figures,
        "answered": None if grade.answered is None else json.dumps(grade.answered),
        "detail": json.dumps(detail),
        "finish_reason": "stop",
        "latency_s": 0.5,
    }, grade


def build_probe_warehouse(root: Path, seed: int = 5) -> Built:
    """Counting-Stars, cases and rag answers in a warehouse of their own."""
    store = Warehouse(root).ensure()
    config = parse_config(PROBES_CONFIG, "probes.yaml")
    contexts = build_probe_contexts(config)
    rng = random.Random(seed)
    run_id = f"run-{PROBES_EPOCH}"
    at = T0 + timedelta(days=2)
    tables: dict[str, list[dict[str, Any]]] = {"cells": [], "answers": [], "needle_outcomes": []}
    tables["runs"] = [_start_row(run_id, PROBES_EPOCH, config, at, len(contexts))]
    replies: dict[tuple[str, str], str] = {}
    for cell_id, context in contexts.items():
        cell = context.cell
        at += timedelta(seconds=1)
        tables["cells"].append(_cell_row(context, run_id))
        reply = (
            stars_reply(context, rng) if cell.probe == "counting_stars" else cases_reply(context)
        )
        replies[(PROBES_EPOCH, cell_id)] = reply
        answer, grade = _probe_answer(context, reply, run_id, at)
        tables["answers"].append(answer)
        key = AnswerKey(run_id, PROBES_EPOCH, cell_id, cell.model, cell.probe)
        graded = table_rows(answer_tables([grade]), [key])
        tables["needle_outcomes"] += graded.get("needle_outcomes", [])
    for name, rows in tables.items():
        store.append(name, rows)
    return Built(store, config, contexts, replies)
