"""The report's model comparison: pick two models (or two epochs of one model) and read, per
length × needle count, each one's mean accuracy, the paired difference with its bootstrap
95% interval and the McNemar p-value of the per-needle hits.

Every pair is computed here with :func:`significance.paired_comparison` and embedded as JSON;
the page's script only shows the chosen one (no server). Pairs:

* two models, paired answer by answer within each epoch (the same needles at the same
  places: the cells' ``context_id``), over every epoch; past :data:`POOLED_MAX_ANSWERS`
  answers of the probe, within its latest epoch only (a pooled comparison reads them all);
* two epochs of one model (of its :data:`MAX_EPOCHS` latest; past POOLED_MAX_ANSWERS, its
  latest and the one before), paired by ``cell_id``.

At most :data:`MAX_MODELS` models per probe (those with the most answers) are compared, so a
page holds at most ``C(15, 2) + 15 × C(3, 2) = 150`` comparisons per probe, and no more are
computed once :data:`COMPARE_SECONDS` have gone by (the page says which were left out).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl

from needlescope.warehouse.report.html import esc, json_clean, json_script
from needlescope.warehouse.stats import significance

MAX_MODELS = 15
MAX_EPOCHS = 3
POOLED_MAX_ANSWERS = 250_000
COMPARE_SECONDS = 30.0
SEP = "\x1f"


def entry_id(model: str, epoch: str | None = None) -> str:
    return model if epoch is None else f"{model}{SEP}{epoch}"


def _models(con: duckdb.DuckDBPyConnection, probe: str) -> tuple[list[str], int, int]:
    """The models compared (most answers first, at most MAX_MODELS) in name order, how many
    models there are, and how many answers they all have."""
    rows = con.execute(
        """
        SELECT model, count(*) AS n FROM results
        WHERE probe = $probe AND error_kind IS NULL
        GROUP BY model ORDER BY n DESC, model
        """,
        {"probe": probe},
    ).fetchall()
    total = sum(int(n) for _, n in rows)
    return sorted(str(m) for m, _ in rows[:MAX_MODELS]), len(rows), total


def _epochs(
    con: duckdb.DuckDBPyConnection, probe: str, models: Sequence[str]
) -> dict[str, list[str]]:
    """Each model's epochs, oldest first (by their first answer)."""
    rows = con.execute(
        """
        SELECT model, epoch, min(answered_at) AS first FROM results
        WHERE probe = $probe AND error_kind IS NULL AND list_contains($models, model)
        GROUP BY model, epoch ORDER BY model, first, epoch
        """,
        {"probe": probe, "models": list(models)},
    ).fetchall()
    epochs: dict[str, list[str]] = {}
    for model, epoch, _ in rows:
        epochs.setdefault(str(model), []).append(str(epoch))
    return epochs


def _latest(con: duckdb.DuckDBPyConnection, probe: str) -> str | None:
    rows = con.execute(
        """
        SELECT epoch FROM results WHERE probe = $probe AND error_kind IS NULL
        GROUP BY epoch ORDER BY min(answered_at) DESC, epoch DESC LIMIT 1
        """,
        {"probe": probe},
    ).fetchall()
    return str(rows[0][0]) if rows else None


def _cells(frame: pl.DataFrame) -> list[dict[str, Any]]:
    # the page says how each interval was made once, for the whole comparison
    return frame.drop("interval_method").to_dicts()


def _compare(
    con: duckdb.DuckDBPyConnection,
    a: significance.Side,
    b: significance.Side,
    probe: str,
    seed: int,
) -> dict[str, Any]:
    try:
        found = significance.paired_comparison(con, a, b, probe=probe, seed=seed)
    except ValueError as exc:  # e.g. answers that share a pairing key
        return {"error": str(exc)}
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
        pairs: dict[str, Any] = {}
        skipped = 0
        for key, side_a, side_b in planned:
            if time.monotonic() > deadline:
                skipped += 1
                pairs[key] = {
                    "error": f"not computed: the report spends at most {COMPARE_SECONDS:g} s "
                    "on comparisons (see significance.paired_comparison)"
                }
                continue
            pairs[key] = _compare(con, side_a, side_b, probe, seed)
        if skipped:
            note = "; ".join(filter(None, (note, f"{skipped} pairs left out for time")))
        out[probe] = {
            "entries": [{"id": i, "label": label} for i, label in entries.items()],
            "pairs": pairs,
            "default": planned[0][0].split(SEP * 2),
            "note": note,
        }
    return dict(json_clean(out))


STYLE = """
#comparison select { margin: 0 0.6rem 0.4rem 0.2rem; max-width: 28rem; }
#comparison tr.better td { background: #d9f2dd; } #comparison tr.worse td { background: #fde2e1; }
#comparison td.sig-p { font-weight: bold; }
#compare-overall { margin: 0.6rem 0; }
"""

SCRIPT = r"""
(() => {
  const all = JSON.parse(document.getElementById('comparison-data').textContent);
  const sep = '\u001f';
  const probeSelect = document.getElementById('compare-probe');
  const selA = document.getElementById('compare-a');
  const selB = document.getElementById('compare-b');
  const overall = document.getElementById('compare-overall');
  const body = document.querySelector('#compare-table tbody');
  const num = (v, d = 1) => (v === null || v === undefined ? '' : Number(v).toFixed(d));
  const pv = (v) => (v === null || v === undefined ? ''
    : (v < 0.001 ? '<0.001' : Number(v).toFixed(3)));
  const interval = (lo, hi) => (lo === null || hi === null ? '' : num(lo) + ' to ' + num(hi));
  const td = (text, cls) => {
    const c = document.createElement('td');
    c.textContent = text;
    if (cls) c.className = cls;
    return c;
  };

  function options(select, entries, chosen) {
    select.replaceChildren(...entries.map((e) => {
      const o = document.createElement('option');
      o.value = e.id; o.textContent = e.label; o.selected = e.id === chosen;
      return o;
    }));
  }

  // The pair as computed, or the reverse one with its figures mirrored (b - a becomes a - b).
  function find(data, a, b) {
    const direct = data.pairs[a + sep + sep + b];
    if (direct) return direct;
    const r = data.pairs[b + sep + sep + a];
    if (!r || r.error) return r;
    const flip = (c) => ({...c, mean_a: c.mean_b, mean_b: c.mean_a,
      diff: c.diff === null ? null : -c.diff, diff_lo: c.diff_hi === null ? null : -c.diff_hi,
      diff_hi: c.diff_lo === null ? null : -c.diff_lo,
      mcnemar_b01: c.mcnemar_b10, mcnemar_b10: c.mcnemar_b01});
    return {...flip(r), n_pairs: r.n_pairs, cells: r.cells.map(flip)};
  }

  function rowClass(c) {
    if (!c.significant || c.diff === null) return '';
    return c.diff > 0 ? 'better' : 'worse';
  }

  function render() {
    const data = all[probeSelect.value];
    const a = selA.value, b = selB.value;
    body.replaceChildren();
    const found = a === b ? null : find(data, a, b);
    const labelA = selA.selectedOptions[0] ? selA.selectedOptions[0].textContent : a;
    const labelB = selB.selectedOptions[0] ? selB.selectedOptions[0].textContent : b;
    document.getElementById('compare-head-a').textContent = 'A: ' + labelA;
    document.getElementById('compare-head-b').textContent = 'B: ' + labelB;
    if (!found) {
      overall.textContent = a === b ? 'Pick two different sides.'
        : 'Not compared: pick two models, or two epochs of one model.';
      overall.className = '';
      return;
    }
    if (found.error) {
      overall.textContent = 'Cannot compare: ' + found.error;
      overall.className = '';
      return;
    }
    const parts = [
      'Overall: ' + found.n_pairs + ' pairs', 'A ' + num(found.mean_a), 'B ' + num(found.mean_b),
      'B − A ' + num(found.diff) + ' (95% interval ' + interval(found.diff_lo, found.diff_hi) + ')',
      'McNemar p ' + pv(found.mcnemar_p) + ' (' + found.mcnemar_b01 + ' needles only B hit, '
        + found.mcnemar_b10 + ' only A hit)',
    ];
    if (found.dropped_parse_failures) {
      parts.push('left out for a parse failure: ' + found.dropped_parse_failures);
    }
    if (found.dropped_errors) parts.push('left out for a failed request: ' + found.dropped_errors);
    if (found.dropped_invalid) {
      parts.push('left out as invalid (truncated, refused, …): ' + found.dropped_invalid);
    }
    overall.textContent = parts.join(' · ');
    overall.className = rowClass(found);
    found.cells.forEach((c) => {
      const tr = document.createElement('tr');
      tr.className = rowClass(c);
      const length = c.length === null ? ''
        : Number(c.length).toLocaleString('en-US') + ' ' + (c.length_unit ?? '');
      const small = c.mcnemar_p !== null && c.mcnemar_p < 0.05;
      tr.append(td(length), td(c.needle_count ?? ''), td(c.n), td(num(c.mean_a)),
        td(num(c.mean_b)), td(num(c.diff)), td(interval(c.diff_lo, c.diff_hi)),
        td(pv(c.mcnemar_p), small ? 'sig-p' : ''), td(c.needle_pairs), td(c.dropped_invalid));
      body.append(tr);
    });
  }

  function loadProbe() {
    const data = all[probeSelect.value];
    options(selA, data.entries, data.default[0]);
    options(selB, data.entries, data.default[1]);
    const note = document.getElementById('compare-note');
    note.textContent = data.note ? 'Compared: ' + data.note + '.' : '';
    render();
  }
  probeSelect.addEventListener('change', loadProbe);
  selA.addEventListener('change', render);
  selB.addEventListener('change', render);
  document.getElementById('compare-swap').addEventListener('click', () => {
    const a = selA.value; selA.value = selB.value; selB.value = a; render();
  });
  loadProbe();
})();
"""


def section(data: dict[str, Any]) -> tuple[str, str]:
    """(the section's HTML with its JSON block, its script); empty without any pair."""
    if not data:
        return "", ""
    probes = "".join(f"<option value='{esc(p)}'>{esc(p)}</option>" for p in data)
    head = (
        "<tr><th>length</th><th>needles</th><th>pairs</th><th id='compare-head-a'>A</th>"
        "<th id='compare-head-b'>B</th><th>B − A</th><th>95% interval</th><th>McNemar p</th>"
        "<th>needle pairs</th><th>left out: invalid</th></tr>"
    )
    body = f"""
<section id='comparison'><h2>Compare models</h2>
<p class='muted'>Pick two models (answers paired within each epoch: the same needles at the same
places) or two epochs of one model (paired by cell). Figures are mean accuracy (%) over the
pairs both sides parsed; B − A with its paired-bootstrap 95% interval; McNemar's exact test on
the needles one side hit and the other missed. Green rows: B is significantly better (the
interval excludes 0); red: worse. Per-cell p-values are not adjusted for multiple comparisons.</p>
<label>probe <select id='compare-probe'>{probes}</select></label>
<label>A <select id='compare-a'></select></label>
<label>B <select id='compare-b'></select></label>
<button type='button' id='compare-swap'>swap</button>
<p id='compare-note' class='muted'></p>
<p id='compare-overall'></p>
<div class='scroll'><table id='compare-table'><thead>{head}</thead><tbody></tbody></table></div>
{json_script("comparison-data", data)}
</section>"""
    return body, f"<script>{SCRIPT}</script>"
