"""mrcr in the report: its score and nonce-hit heatmaps, and its answers beside the reply
they were asked for (the worst first)."""

from __future__ import annotations

import json

import duckdb

from needlescope.warehouse.charts.shared import Chart
from needlescope.warehouse.probes.mrcr import charts as charts_mrcr
from needlescope.warehouse.report.figures import ProbeCharts
from needlescope.warehouse.report.html import esc, number
from needlescope.warehouse.report.sections.answers_side import SHOWN, pre, wrap


def charts(con: duckdb.DuckDBPyConnection) -> list[tuple[str, Chart]]:
    scores = con.sql("SELECT * FROM mrcr_scores").pl()
    return [
        ("score", charts_mrcr.score_heatmap(scores)),
        ("nonce_hits", charts_mrcr.nonce_heatmap(scores)),
    ]


def answers(con: duckdb.DuckDBPyConnection, probe: str) -> str:
    rows = con.execute(
        """
        SELECT m.model, m.length, m.needles, m.ask, m.form, m.topic, m.score, m.nonce_hit,
               m.closest, m.wrong_occurrence, m.response, r.expected
        FROM mrcr_results m JOIN results r USING (epoch, cell_id, run_id)
        WHERE m.error_kind IS NULL
        ORDER BY m.score NULLS FIRST, m.model, m.length, m.needles
        LIMIT ?
        """,
        [SHOWN],
    ).fetchall()
    blocks = []
    for model, length, needles, ask, form, topic, score, hit, closest, wrong, response, exp in rows:
        replies = json.loads(exp).get("replies") or [json.loads(exp).get("reply")]
        reproduced = replies[closest - 1] if closest and closest <= len(replies) else None
        said = "the asked one" if wrong is None else f"occurrence {wrong}, not the asked {ask}"
        summary = (
            f"{esc(model)} · length {number(length)} · {needles} repeats · asked the {ask}"
            f" of the {esc(form)} about {esc(topic)} · score {number(score)} · nonce"
            f" {'hit' if hit else 'missed'} · reproduced {said}"
        )
        blocks.append(
            "<details class='answer'>"
            f"<summary>{summary}</summary>"
            "<table class='side-by-side'><tr><th>asked reply (occurrence"
            f" {ask})</th><th>the reply the answer reproduced (occurrence {closest})</th></tr>"
            f"<tr><td>{pre(replies[ask - 1])}</td><td>{pre(reproduced)}</td></tr></table>"
            f"<p>The answer:</p>{pre(response)}</details>"
        )
    return wrap("MRCR answers, lowest score first", blocks)


def figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts:
    return ProbeCharts(charts(con))
