"""Per-answer drill-down blocks of the probes whose answers are read against a text of the
prompt rather than needles in a haystack: mrcr (the asked reply and the reply the answer
reproduced, side by side) and latent_list (the program, the final value and what was said).

Each is a list of ``<details>`` in the probe's section, the worst answers first."""

from __future__ import annotations

import json
from collections.abc import Callable

import duckdb

from needlescope.warehouse.report.html import esc, number

SHOWN = 40  # answers per probe section
TEXT_CHARS = 4000  # of each reply and response


def _pre(text: object) -> str:
    return f"<pre>{esc(str(text or '')[:TEXT_CHARS])}</pre>"


def mrcr(con: duckdb.DuckDBPyConnection) -> str:
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
            f"<tr><td>{_pre(replies[ask - 1])}</td><td>{_pre(reproduced)}</td></tr></table>"
            f"<p>The answer:</p>{_pre(response)}</details>"
        )
    return _wrap("MRCR answers, lowest score first", blocks)


def latent_list(con: duckdb.DuckDBPyConnection) -> str:
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
            f"<tr><td>{_pre(program)}</td><td>{_pre(want)}{_pre(said)}</td></tr></table>"
            f"<p>The answer:</p>{_pre(response)}</details>"
        )
    return _wrap("Latent-list answers, misses first", blocks)


def _wrap(title: str, blocks: list[str]) -> str:
    if not blocks:
        return ""
    return f"<h4>{esc(title)}</h4><div class='side-answers'>{''.join(blocks)}</div>"


DETAILS: dict[str, Callable[[duckdb.DuckDBPyConnection], str]] = {
    "mrcr": mrcr,
    "latent_list": latent_list,
}


def answers_html(con: duckdb.DuckDBPyConnection, probe: str) -> str:
    """The probe's answer blocks ('' for the probes drilled into from their heatmaps)."""
    maker = DETAILS.get(probe)
    return maker(con) if maker else ""
