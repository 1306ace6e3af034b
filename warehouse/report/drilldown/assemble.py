"""Drill-down: the answers behind a cell of a heatmap, embedded in the page.
(``collect`` runs past 60 lines: the page's JSON assembled in its order, in one place.)

Each family of heatmaps is a :class:`Target` (the probes whose answers it pools, the config
columns it is drawn from, how a row becomes the chart datum's fields). Per heatmap cell the page
carries up to :data:`PER_CELL` answers, picked in DuckDB: the expected needles, the reply, the
grade, the per-needle outcomes and the haystack around each needle, rebuilt from the cell row
and checked against the stored SHA-256. Everything is one JSON object in the page
(``id="drilldown"``), looked up by chart id and :func:`cell_key`.

Design: docs/design/report.md#drilldown
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.report.drilldown.rebuild import (
    CONTEXT_CHARS,
    ContextUnavailable,
    Rebuilder,
    facts_of,
    found_in_prompt,
    needle_values,
    snippets,
)
from needlescope.warehouse.report.drilldown.select import (
    Details,
    config_counts,
    frame_or_empty,
    pick,
    read_details,
)
from needlescope.warehouse.report.drilldown.targets import Heatmap, Target
from needlescope.warehouse.report.html import json_clean, json_script, template
from needlescope.warehouse.stats.sql import registered

PER_CELL = 8  # answers shown per heatmap cell
MAX_ANSWERS = 1500  # answers in one page: fewer per cell when the heatmaps have many cells
RESPONSE_CHARS = 4000  # of each reply
RESPONSE_BUDGET = 2_000_000  # characters of replies in one page: shorter cuts past it
CONTEXT_BUDGET = 3_000_000  # characters of context in one page, all cells together
REBUILD_SECONDS = 30.0  # time spent rebuilding contexts, all cells together


def _outcome_codes(rows: Sequence[Sequence[Any]], names: list[str]) -> str:
    """The outcome of needle i as the i-th character: a base-36 index into ``names`` (which
    grows as outcomes are met), "-" for a needle without a row. Compact: 1 byte a needle."""
    by_index = {int(i): str(outcome) for i, outcome in rows if i is not None}
    if not by_index:
        return ""
    codes = []
    for index in range(1, max(by_index) + 1):
        outcome = by_index.get(index)
        if outcome is None:
            codes.append("-")
            continue
        if outcome not in names:
            names.append(outcome)
        codes.append(_BASE36[names.index(outcome) % 36])
    return "".join(codes)


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _expected(text: object) -> dict[str, Any]:
    """What a cell expected, for the panel: its needle values (a needle case's sentences, with
    its question, true answer and each needle's keywords)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        found = {k: value[k] for k in ("question", "true_answer", "keywords") if k in value}
        return {"expected": needle_values(value), **found}
    if value is None:
        return {"expected": []}
    return {"expected": needle_values(value) or [value]}


def _retrieval(row: Mapping[str, Any]) -> list[str] | None:
    """Where each needle of a RAG cell went: into the prompt, in part, or not at all."""
    records = facts_of(row).get("retrieval")
    if not isinstance(records, list):
        return None
    notes = []
    for record in records:
        record = record if isinstance(record, dict) else {}
        where = (
            "in the prompt"
            if record.get("retrieved")
            else ("partly in the prompt" if record.get("partial") else "not retrieved")
        )
        rank = record.get("rank")
        notes.append(where if rank is None else f"{where} (its chunk ranked {rank})")
    return notes


def _contexts(
    con: duckdb.DuckDBPyConnection,
    cells: pl.DataFrame,
    configs: Mapping[str, str | None],
    width: int,
) -> dict[str, dict[str, Any]]:
    """Per cell id: its expected needles and their contexts, or why those are unavailable."""
    builder = Rebuilder(configs)
    contexts: dict[str, dict[str, Any]] = {}
    spent = 0
    deadline = time.monotonic() + REBUILD_SECONDS
    need_prompt: list[str] = []
    rows = {str(r["cell_id"]): r for r in cells.iter_rows(named=True)} if cells.height else {}
    for cell_id, row in rows.items():
        base = _expected(row.get("expected"))
        retrieval = _retrieval(row)
        if retrieval is not None:
            base["retrieval"] = retrieval
        if spent >= CONTEXT_BUDGET or time.monotonic() > deadline:
            contexts[cell_id] = {**base, "unavailable": "left out to keep the page small"}
            continue
        try:
            haystack, offsets, values = builder.haystack(row)
        except ContextUnavailable as exc:
            contexts[cell_id] = {**base, "unavailable": str(exc)}
            if row.get("has_prompt"):
                need_prompt.append(cell_id)
            continue
        parts = snippets(haystack, offsets, values, width)
        spent += sum(len(p) for part in parts for p in part)
        contexts[cell_id] = {**base, "source": "rebuilt", "needles": parts}
    if need_prompt:  # saved prompts: find the needles in them instead
        stored = frame_or_empty(
            con,
            "SELECT cell_id, prompt_text FROM cells WHERE list_contains($ids, cell_id)",
            ids=need_prompt,
        )
        for cell_id, prompt in stored.iter_rows():
            found = contexts[str(cell_id)]
            try:
                offsets, values = found_in_prompt(str(prompt), found["expected"])
            except ContextUnavailable:
                continue
            del found["unavailable"]
            found["source"] = "found in the stored prompt"
            found["needles"] = snippets(str(prompt), offsets, values, width)
    return contexts


def _chart(target: Target, heatmap: Heatmap) -> dict[str, Any]:
    return {
        "target": target.name,
        "title": heatmap.title,
        "focus": heatmap.focus,
        "focus_shown": heatmap.focus_shown,
        "fields": [[f.name, f.shown, f.absent] for f in target.fields],
        "accuracy": target.accuracy,
    }


def collect(
    con: duckdb.DuckDBPyConnection,
    targets: Sequence[Target],
    *,
    source: str = "results",
    per_cell: int = PER_CELL,
    width: int = CONTEXT_CHARS,
) -> dict[str, Any]:
    """The drill-down data of the heatmaps of ``targets``, from ``source`` (``results``: its
    counts from the answer tallies, its answers from the latest epochs first; or a table of
    its rows). JSON-able; see the module docstring.

    Bounded: at most ``per_cell`` answers per heatmap cell, fewer (down to 1) when the
    heatmaps have so many cells that more would pass :data:`MAX_ANSWERS`; replies cut at
    :data:`RESPONSE_CHARS` characters, less (down to 500) past :data:`RESPONSE_BUDGET`.
    """
    data: dict[str, Any] = {
        "per_cell": per_cell,
        "context_chars": width,
        "response_chars": RESPONSE_CHARS,
        "outcome_names": [],
        "charts": {},
        "groups": {},
        "answers": {},
        "contexts": {},
    }
    if not targets:
        return data
    for target in targets:
        for heatmap in target.heatmaps:
            data["charts"][heatmap.chart_id] = _chart(target, heatmap)
    configs = [config_counts(con, target, source) for target in targets]
    cells = sum(frame["key"].n_unique() for frame in configs)
    per_cell = max(1, min(per_cell, MAX_ANSWERS // max(cells, 1)))
    data["per_cell"] = per_cell
    picked = pl.concat(
        [
            pick(con, target, source, per_cell, counted)
            for target, counted in zip(targets, configs, strict=True)
        ],
        how="vertical_relaxed",
    )
    if picked.is_empty():
        return data
    chars = max(500, min(RESPONSE_CHARS, RESPONSE_BUDGET // picked.height))
    data["response_chars"] = chars
    keys = picked.select("run_id", "epoch", "cell_id")
    with registered(con, "drilldown_picked", keys) as view:
        details = read_details(con, view, chars)
    totals = (
        pl.concat(
            [
                frame.select("key", "answers_total", "parsed_total", "errors_total")
                for frame in configs
            ]
        )
        .group_by("key")
        .sum()
    )
    for row in totals.iter_rows(named=True):
        data["groups"][row["key"]] = {
            "answers": row["answers_total"],
            "parsed": row["parsed_total"],
            "errors": row["errors_total"],
            "shown": [],
        }
    _add_answers(data, picked, details)
    data["contexts"] = _contexts(con, details.cells, details.configs, width)
    return dict(json_clean(data))


def _by_answer(frame: pl.DataFrame, columns: Sequence[str]) -> dict[tuple[Any, ...], list[Any]]:
    out: dict[tuple[Any, ...], list[Any]] = {}
    if frame.is_empty():
        return out
    for row in frame.iter_rows(named=True):
        key = (row["run_id"], row["epoch"], row["cell_id"])
        out.setdefault(key, []).append([row[c] for c in columns])
    return out


def _add_answers(data: dict[str, Any], picked: pl.DataFrame, details: Details) -> None:
    """Each picked answer into ``answers``, its id into its cell's ``shown``, in pick order."""
    outcomes = _by_answer(details.needles, ("needle_index", "outcome"))
    extra = _by_answer(details.invented, ("answer_index", "value", "key_from", "key_to"))
    reply = _by_ident(details.replies)
    judged = _by_ident(details.judged)
    for row in picked.iter_rows(named=True):
        ident = (row["run_id"], row["epoch"], row["cell_id"])
        answer_id = f"{row['epoch']}/{row['cell_id']}"
        # a cell answered between the count and the pick (a sweep writing beside the report)
        group = data["groups"].setdefault(
            row["key"], {"answers": 0, "parsed": 0, "errors": 0, "shown": []}
        )
        group["shown"].append(answer_id)
        got = reply.get(ident, {})
        answer = {
            "epoch": row["epoch"],
            "cell_id": row["cell_id"],
            "repeat": row["repeat"],
            "filler": row["filler"],
            "accuracy": row["accuracy"],
            "parse_ok": row["parse_ok"],
            "validity": row["validity"],
            "error_kind": row["error_kind"],
            "error": got.get("error"),
            "parse_error": got.get("parse_error"),
            "response": got.get("response"),
            "response_chars": got.get("response_chars"),
            "finish_reason": got.get("finish_reason"),
            "outcomes": _outcome_codes(outcomes.get(ident, []), data["outcome_names"]),
            "hallucinations": extra.get(ident, []),
        }
        if ident in judged:  # [score, its reason or why there is none]
            verdict = judged[ident]
            reason = verdict["judge_reason"] or verdict["judge_error"]
            answer["judge"] = [verdict["judge_score"], reason]
        data["answers"][answer_id] = answer


def _by_ident(frame: pl.DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
    if frame.is_empty():
        return {}
    return {(r["run_id"], r["epoch"], r["cell_id"]): r for r in frame.iter_rows(named=True)}


def section_parts(data: Mapping[str, Any]) -> tuple[str, str]:
    """(the panel and the JSON block, the script) for the page; empty without heatmaps."""
    if not data.get("charts"):
        return "", ""
    panel = template("drilldown.html") + json_script("drilldown", data)
    return panel, f"<script>{template('drilldown.js')}</script>"
