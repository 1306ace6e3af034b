"""latent_list in the report: its score and consistent-prefix heatmaps, and each answer
beside the program it tracked (misses first)."""

from __future__ import annotations

import json

import duckdb

from needlescope.warehouse.charts.shared import Chart
from needlescope.warehouse.probes.latent_list import charts as charts_latent
from needlescope.warehouse.report.figures import ProbeCharts
from needlescope.warehouse.report.html import esc, number
from needlescope.warehouse.report.sections.answers_side import SHOWN, pre, wrap


def charts(con: duckdb.DuckDBPyConnection) -> list[tuple[str, Chart]]:
    scores = con.sql("SELECT * FROM latent_list_scores").pl()
    return [
        ("score", charts_latent.score_heatmap(scores)),
        ("consistent_prefix", charts_latent.prefix_heatmap(scores)),
    ]


def answers(con: duckdb.DuckDBPyConnection, probe: str) -> str:
    rows = con.execute(
        """
        SELECT l.model, l.length, l.operations, l.irrelevant, l.query, l.score,
               l.consistent_with, l.expected_answer, l.answered, l.response, r.facts
        FROM latent_list_results l JOIN results r USING (epoch, cell_id, run_id)
        WHERE l.error_kind IS NULL
        ORDER BY l.score NULLS FIRST, l.model, l.length, l.operations
        LIMIT ?
        """,
        [SHOWN],
    ).fetchall()
    blocks = []
    for model, length, ops, irrelevant, query, score, prefix, want, said, response, facts in rows:
        program = "\n".join(json.loads(facts).get("statements") or [])
        tracked = "no state" if prefix is None else f"{prefix} of {ops} operations"
        summary = (
            f"{esc(model)} · length {number(length)} · {ops} operations, {irrelevant}"
            f" irrelevant · {esc(query)} · score {number(score)} · consistent with {tracked}"
        )
        blocks.append(
            f"<details class='answer'><summary>{summary}</summary>"
            "<table class='side-by-side'><tr><th>the program</th><th>expected · read</th></tr>"
            f"<tr><td>{pre(program)}</td><td>{pre(want)}{pre(said)}</td></tr></table>"
            f"<p>The answer:</p>{pre(response)}</details>"
        )
    return wrap("Latent-list answers, misses first", blocks)


def figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts:
    return ProbeCharts(charts(con))
