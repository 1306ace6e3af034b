"""goto in the report: success by n and the wrong answers' offsets from line k."""

from __future__ import annotations

import duckdb

from needlescope.warehouse.probes.goto import charts as charts_goto
from needlescope.warehouse.report.figures import ProbeCharts, frame


def figures(con: duckdb.DuckDBPyConnection, probe: str) -> ProbeCharts:
    # a line chart and a histogram: no heatmap to drill into
    return ProbeCharts(
        [
            ("success_by_n", charts_goto.success_by_n(frame(con, "goto_success"))),
            ("wrong_offsets", charts_goto.wrong_offsets(frame(con, "goto_wrong_offsets"))),
        ]
    )
