"""Drill-down: the answers behind a cell of a heatmap, embedded in the page.

``targets`` names the heatmaps and the key of a clicked cell, ``select`` picks the answers in
SQL, ``rebuild`` rebuilds each picked cell's haystack around its needles, and ``assemble`` puts
them together as the page's JSON (see its docstring); ``templates/drilldown.*`` show them.
"""

from needlescope.warehouse.report.drilldown.assemble import RESPONSE_CHARS, collect, section_parts
from needlescope.warehouse.report.drilldown.rebuild import (
    ContextUnavailable,
    Rebuilder,
    cell_of,
    locate,
    snippets,
)
from needlescope.warehouse.report.drilldown.targets import (
    HEATMAPS,
    Target,
    cell_key,
    key_part,
    page_id,
    recall_target,
)

__all__ = [
    "HEATMAPS",
    "RESPONSE_CHARS",
    "ContextUnavailable",
    "Rebuilder",
    "Target",
    "cell_key",
    "cell_of",
    "collect",
    "key_part",
    "locate",
    "page_id",
    "recall_target",
    "section_parts",
    "snippets",
]
