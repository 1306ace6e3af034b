"""The charts of the probes added after the first five (mrcr, latent_list), read from their
own views; figures.py names them in its FIGURES."""

from __future__ import annotations

import duckdb

from needlescope.warehouse.charts import latent_list as charts_latent
from needlescope.warehouse.charts import mrcr as charts_mrcr
from needlescope.warehouse.charts.shared import Chart


def mrcr(con: duckdb.DuckDBPyConnection) -> list[tuple[str, Chart]]:
    scores = con.sql("SELECT * FROM mrcr_scores").pl()
    return [
        ("score", charts_mrcr.score_heatmap(scores)),
        ("nonce_hits", charts_mrcr.nonce_heatmap(scores)),
    ]


def latent_list(con: duckdb.DuckDBPyConnection) -> list[tuple[str, Chart]]:
    scores = con.sql("SELECT * FROM latent_list_scores").pl()
    return [
        ("score", charts_latent.score_heatmap(scores)),
        ("consistent_prefix", charts_latent.prefix_heatmap(scores)),
    ]
