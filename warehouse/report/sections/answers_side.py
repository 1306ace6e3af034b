"""Per-answer blocks of the probes whose answers are read against a text of the prompt rather
than needles in a haystack (mrcr, latent_list: their warehouse sides' ``answers``), and the
pieces they share. Each is a list of ``<details>`` in the probe's section, the worst first."""

from __future__ import annotations

import duckdb

from needlescope.warehouse.report.html import esc

SHOWN = 40  # answers per probe section
TEXT_CHARS = 4000  # of each reply and response


def pre(text: object) -> str:
    return f"<pre>{esc(str(text or '')[:TEXT_CHARS])}</pre>"


def wrap(title: str, blocks: list[str]) -> str:
    if not blocks:
        return ""
    return f"<h4>{esc(title)}</h4><div class='side-answers'>{''.join(blocks)}</div>"


def answers_html(con: duckdb.DuckDBPyConnection, probe: str) -> str:
    """The probe's answer blocks, from its warehouse side's ``answers`` ('' for the probes
    drilled into from their heatmaps)."""
    from needlescope.warehouse import probes

    return probes.answers(con, probe)
