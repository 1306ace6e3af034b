"""Error statistics as tidy Polars frames, read from the views (never from file paths).

Every summary is one SQL definition, :func:`summary_sql`, grouped by whichever axes a table
or chart needs. Accuracy figures are over valid answers (``COUNTED``: validity ``valid`` or
``unknown``) that have an accuracy (``PARSED``): a recall parse failure counts as an answer but
has none (the seed's rule), while a counting_stars reply with no list scores 0 (needlescope's
rule). The other answers are counted apart as ``invalid``, with ``invalid_why`` naming their
validities; failed requests (``error_kind`` set) are counted apart as ``errors``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import duckdb
import polars as pl

from needlescope.warehouse.stats.sql import registered
from needlescope.warehouse.stats.sql import same as same_axes
from needlescope.warehouse.store.figures import (
    AXES,
    COUNTED,
    PARSED,
    UNSTABLE_RANGE,
    UNSTABLE_VARIABLE,
    needle_counts_sql,
    quoted,
    result_axes,
    summary_sql,
    tallied_counts_sql,
)


def _order(axes: Sequence[str]) -> str:
    return ", ".join(f'"{axis}" NULLS FIRST' for axis in axes)


def recall_stats(
    con: duckdb.DuckDBPyConnection,
    unstable_range: float = UNSTABLE_RANGE,
    *,
    source: str = "results",
) -> pl.DataFrame:
    """The statistics table: one row per cell config, with the spread of its repeats.

    ``source``: the ``results`` view, or a table holding (some of) its rows and columns.
    """
    set_unstable_range(con, unstable_range)
    query = "SELECT * FROM recall_stats" if source == "results" else summary_sql(AXES, source)
    return con.sql(f"{query} ORDER BY {_order(AXES)}").pl()


def set_unstable_range(con: duckdb.DuckDBPyConnection, unstable_range: float) -> None:
    """The threshold of the ``unstable`` flag the ``recall_stats`` view gives on ``con``."""
    con.execute(f"SET VARIABLE {UNSTABLE_VARIABLE} = {float(unstable_range)!r}")


def accuracy_summary(con: duckdb.DuckDBPyConnection, axes: Sequence[str]) -> pl.DataFrame:
    """The same figures as :func:`recall_stats`, grouped by any axes of ``results``."""
    return con.sql(f"{summary_sql(axes)} ORDER BY {_order(axes)}").pl()


def accuracy_by_length(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Mean accuracy (with its 95% interval) and parse failures per cell config."""
    return accuracy_summary(con, AXES)


def needle_rates(
    con: duckdb.DuckDBPyConnection, *, source: str = "results", whole: bool | None = None
) -> pl.DataFrame:
    """Per needle index of every cell config: shares (0-100) of the parsed answers that
    recalled it in order (the seed's position accuracy), missed it, or misordered it.

    ``whole``: ``source`` holds every row of ``results`` (the default for ``results``), so the
    counts are read from the needle tallies instead of joining every needle row."""
    tallied = source == "results" if whole is None else whole
    if tallied:
        counts = tallied_counts_sql(
            AXES,
            {
                "parsed_answers": "needles",
                "in_order": "in_lcs",
                "missing": "missing",
                "misorder": "misorder",
            },
        )
    else:
        counts = needle_counts_sql(
            AXES,
            {
                "parsed_answers": "count(*)",
                "in_order": "count(*) FILTER (WHERE o.in_lcs)",
                "missing": "count(*) FILTER (WHERE o.outcome = 'missing')",
                "misorder": "count(*) FILTER (WHERE o.outcome = 'misorder')",
            },
            source,
        )
    return con.sql(
        f"""
        SELECT *,
               100.0 * in_order / parsed_answers AS position_accuracy,
               100.0 * missing / parsed_answers AS missing_rate,
               100.0 * misorder / parsed_answers AS misorder_rate
        FROM ({counts})
        ORDER BY {_order(AXES)}, needle_index
        """
    ).pl()


def hallucination_rates(
    con: duckdb.DuckDBPyConnection,
    *,
    source: str = "results",
    stats_table: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Hallucinated values per parsed answer, by the anchor interval they sit in.

    Every interval seen in a config is listed at every length of that config with parsed
    answers, with 0 where none fell in it, so a heatmap tells "none" from "not tested".
    ``stats_table``: :func:`recall_stats`' rows, when read already (their ``graded`` counts
    are the parsed answers; the view would be derived again).
    """
    cols = quoted(AXES)
    variant = [a for a in AXES if a != "length"]
    found = _invented_sql(source)
    counted = (
        contextlib.nullcontext("recall_stats")
        if stats_table is None
        else registered(con, "needlescope_stats_table", stats_table.select(*AXES, "graded"))
    )
    with counted as graded:
        parsed = (
            # the graded answers per config: recall_stats' count, from the tallies
            f"SELECT {cols}, graded AS parsed_answers FROM {graded} WHERE graded > 0"
            if source == "results"
            else f"SELECT {cols}, count(*) AS parsed_answers FROM {source} WHERE {PARSED} "
            f"GROUP BY {cols}"
        )
        return con.sql(
            f"""
            WITH parsed AS ({parsed}), found AS ({found}), intervals AS (
                SELECT DISTINCT {quoted(variant)}, key_from, key_to FROM found
            ), grid AS (
                SELECT p.*, k.key_from, k.key_to
                FROM parsed p JOIN intervals k ON {same_axes(variant, "p", "k")}
            )
            SELECT {", ".join(f'p."{a}"' for a in AXES)}, p.key_from, p.key_to,
                   concat(p.key_from, '–', p.key_to) AS interval,
                   coalesce(i.hallucinations, 0) AS hallucinations,
                   p.parsed_answers,
                   coalesce(i.hallucinations, 0) / p.parsed_answers AS per_answer
            FROM grid p
            LEFT JOIN found i ON {same_axes(AXES, "p", "i")}
                AND p.key_from = i.key_from AND p.key_to = i.key_to
            ORDER BY {", ".join(f'p."{a}" NULLS FIRST' for a in AXES)}, p.key_from, p.key_to
            """
        ).pl()


def _invented_sql(source: str) -> str:
    """The hallucinations per config and anchor interval, of ``results`` or of ``source``."""
    return (
        # the hallucination tallies: per cell and interval, kept up to date by the rollups
        f"""SELECT {result_axes(AXES)}, t.key_from, t.key_to,
                   sum(t.hallucinations)::BIGINT AS hallucinations
            FROM hallucination_tallies t JOIN cells c USING (cell_id)
            WHERE t.{COUNTED}
            GROUP BY ALL"""
        if source == "results"
        # the hallucinations view's rows (those of the answers in results), by config
        else f"""SELECT {", ".join(f'r."{a}"' for a in AXES)}, h.key_from, h.key_to,
                   count(*) AS hallucinations
            FROM raw_hallucinations h
            JOIN {source} r ON r.run_id = h.run_id AND r.epoch = h.epoch
                AND r.cell_id = h.cell_id
            WHERE r.{COUNTED}
            GROUP BY ALL"""
    )


def run_overview(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.sql(
        """
        SELECT run_id, epoch, config_name, started_at, ended_at, cells_total, cells_skipped,
               cells_dropped, cells_graded, cells_failed, needlescope_version, note
        FROM runs ORDER BY started_at DESC LIMIT 50
        """
    ).pl()


def error_counts(con: duckdb.DuckDBPyConnection, *, source: str = "results") -> pl.DataFrame:
    """Failed cells (those of ``failed_cells``) per model and error kind (of ``results``:
    counted by the answer tallies)."""
    if source == "results":
        return con.sql(
            """
            SELECT t.model, t.error_kind, sum(t.answers)::BIGINT AS cells
            FROM answer_tallies t SEMI JOIN cells c ON c.cell_id = t.cell_id
            WHERE t.error_kind IS NOT NULL
            GROUP BY ALL HAVING sum(t.answers) > 0 ORDER BY cells DESC, model, error_kind
            """
        ).pl()
    return con.sql(
        f"""
        SELECT model, error_kind, count(*) AS cells
        FROM {source} WHERE error_kind IS NOT NULL
        GROUP BY ALL ORDER BY cells DESC, model, error_kind
        """
    ).pl()
