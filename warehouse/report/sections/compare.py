"""The report's model comparison: pick two models (or two epochs of one model) and read, per
length × needle count, each one's mean accuracy, the paired difference with its bootstrap
95% interval and the McNemar p-value of the per-needle hits.

Every pair is computed here with :func:`significance.paired_comparisons` (:data:`CHUNK` pairs
at a time) and embedded as JSON; the page's script only shows the chosen one (no server). Past
:data:`POOLED_MAX_ANSWERS` answers a probe's pairs read only its latest epochs; at most
:data:`MAX_MODELS` models per probe are compared, and no chunk starts once
:data:`COMPARE_SECONDS` have gone by (the page says which were left out).

Design: docs/design/report.md#compare
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.report.html import esc, fill, json_clean, json_script, template
from needlescope.warehouse.stats import epochs as epoch_sets
from needlescope.warehouse.stats import significance

MAX_MODELS = 15
MAX_EPOCHS = 3
POOLED_MAX_ANSWERS = 250_000
COMPARE_SECONDS = 30.0
# Pairs computed together: a 10M-answer warehouse's 15 (models within the latest epoch, and
# each one's latest two epochs) in one; a chunk of a small warehouse's 150 takes well under a
# second, so the deadline is overrun by about that much at most.
CHUNK = 25
SEP = "\x1f"


def entry_id(model: str, epoch: str | None = None) -> str:
    return model if epoch is None else f"{model}{SEP}{epoch}"


def _models(con: duckdb.DuckDBPyConnection, probe: str) -> tuple[list[str], int, int]:
    """The models compared (most answers first, at most MAX_MODELS) in name order, how many
    models there are, and how many answers they all have."""
    # results' graded answers per model, from the answer tallies
    rows = con.execute(
        """
        SELECT t.model, sum(t.answers) AS n FROM answer_tallies t SEMI JOIN cells USING (cell_id)
        WHERE t.probe = $probe AND t.graded
        GROUP BY t.model ORDER BY n DESC, t.model
        """,
        {"probe": probe},
    ).fetchall()
    total = sum(int(n) for _, n in rows)
    return sorted(str(m) for m, _ in rows[:MAX_MODELS]), len(rows), total


def _epochs(
    con: duckdb.DuckDBPyConnection, probe: str, models: Sequence[str]
) -> dict[str, list[str]]:
    """Each model's epochs with a graded answer, oldest first (by their first graded attempt:
    views.sql's result_attempts)."""
    return epoch_sets.by_first_graded(con, probe, models)


def _latest(con: duckdb.DuckDBPyConnection, probe: str) -> str | None:
    return epoch_sets.latest_graded(con, probe)


def _cells(frame: pl.DataFrame) -> list[dict[str, Any]]:
    # the page says how each interval was made once, for the whole comparison
    return frame.drop("interval_method").to_dicts()


def _entry(found: significance.Comparison | ValueError) -> dict[str, Any]:
    if isinstance(found, ValueError):  # e.g. answers that share a pairing key
        return {"error": str(found)}
    return {**found.to_dict(), "cells": _cells(found.cells)}


def _plan(
    con: duckdb.DuckDBPyConnection, probe: str
) -> tuple[dict[str, str], list[tuple[str, significance.Side, significance.Side]], str]:
    """The entries a reader picks from (id: label), the pairs to compare, and a note."""
    models, count, total = _models(con, probe)
    epochs = _epochs(con, probe, models)
    entries: dict[str, str] = {}
    pairs: list[tuple[str, significance.Side, significance.Side]] = []
    notes = []
    if count > MAX_MODELS:
        notes.append(f"the {MAX_MODELS} models with the most answers of {count}")
    latest = None if total <= POOLED_MAX_ANSWERS else _latest(con, probe)
    if latest is None:
        entries |= {entry_id(m): f"{m} (all epochs)" for m in models}
        model_sides = [significance.Side(m) for m in models]
    else:
        notes.append(
            f"models within the latest epoch, {latest} ({total:,} answers: all epochs are "
            f"pooled up to {POOLED_MAX_ANSWERS:,})"
        )
        present = [m for m in models if latest in epochs.get(m, [])]
        entries |= {entry_id(m, latest): f"{m} · epoch {latest}" for m in present}
        model_sides = [significance.Side(m, latest) for m in present]
    for side_a, side_b in itertools.combinations(model_sides, 2):
        pairs.append((_pair_key(side_a) + SEP * 2 + _pair_key(side_b), side_a, side_b))
    # a large warehouse: each model's latest epoch against the one before only
    kept = MAX_EPOCHS if latest is None else 2
    for model in models:
        own = epochs.get(model, [])[-kept:]
        if len(own) < 2:
            continue
        entries |= {entry_id(model, e): f"{model} · epoch {e}" for e in own}
        for before, after in itertools.combinations(own, 2):
            side_a, side_b = significance.Side(model, before), significance.Side(model, after)
            pairs.append((_pair_key(side_a) + SEP * 2 + _pair_key(side_b), side_a, side_b))
    return entries, pairs, "; ".join(notes)


def _pair_key(side: significance.Side) -> str:
    return entry_id(side.model, side.epoch)


def collect(
    con: duckdb.DuckDBPyConnection, probes: Sequence[str], *, seed: int = 0
) -> dict[str, Any]:
    """Every comparison of every probe, JSON-able: ``{probe: {entries, pairs, default, note}}``
    (``entries``: [{id, label}]; ``pairs``: by "a-id\\x1f\\x1fb-id", each
    :meth:`Comparison.to_dict` with its ``cells``, or ``{"error": why}``)."""
    out: dict[str, Any] = {}
    deadline = time.monotonic() + COMPARE_SECONDS
    for probe in probes:
        entries, planned, note = _plan(con, probe)
        if not planned:
            continue
        pairs, skipped = _compared(con, planned, probe, seed, deadline)
        if skipped:
            note = "; ".join(filter(None, (note, f"{skipped} pairs left out for time")))
        out[probe] = {
            "entries": [{"id": i, "label": label} for i, label in entries.items()],
            "pairs": pairs,
            "default": planned[0][0].split(SEP * 2),
            "note": note,
        }
    return dict(json_clean(out))


def _compared(
    con: duckdb.DuckDBPyConnection,
    planned: Sequence[tuple[str, significance.Side, significance.Side]],
    probe: str,
    seed: int,
    deadline: float,
) -> tuple[dict[str, Any], int]:
    """The planned pairs' entries by key, computed a chunk at a time until ``deadline``, and
    how many were left out for time."""
    pairs: dict[str, Any] = {}
    skipped = 0
    for start in range(0, len(planned), CHUNK):
        chunk = planned[start : start + CHUNK]
        if time.monotonic() > deadline:
            skipped += len(chunk)
            late = (
                f"not computed: the report spends at most {COMPARE_SECONDS:g} s on comparisons "
                "(see significance.paired_comparisons)"
            )
            pairs |= {key: {"error": late} for key, _, _ in chunk}
            continue
        found = significance.paired_comparisons(
            con, [(a, b) for _, a, b in chunk], probe=probe, seed=seed
        )
        pairs |= {key: _entry(found[(a, b)]) for key, a, b in chunk}
    return pairs, skipped


def section(data: dict[str, Any]) -> tuple[str, str]:
    """(the section's HTML with its JSON block, its script); empty without any pair."""
    if not data:
        return "", ""
    probes = "".join(f"<option value='{esc(p)}'>{esc(p)}</option>" for p in data)
    body = fill("compare.html", probes=probes, data=json_script("comparison-data", data))
    return body, f"<script>{template('compare.js')}</script>"
