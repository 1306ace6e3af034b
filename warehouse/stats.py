"""Error statistics as tidy Polars frames, read from the views (never from file paths).

Every summary is one SQL definition, :func:`summary_sql`, grouped by whichever axes a table
or chart needs. Accuracy figures are over valid answers (``COUNTED``: validity ``valid`` or
``unknown``) that have an accuracy (``PARSED``): a recall parse failure counts as an answer but
has none (the seed's rule), while a counting_stars reply with no list scores 0 (needlescope's
rule). The other answers are counted apart as ``invalid``, with ``invalid_why`` naming their
validities; failed requests (``error_kind`` set) are counted apart as ``errors``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb
import polars as pl

from needlescope import validity as _validity

# An answer that measures recall; accuracy figures are computed over these only.
COUNTED = f"validity IN ({', '.join(repr(v) for v in sorted(_validity.COUNTED))})"
INVALID = f"validity NOT IN ({', '.join(repr(v) for v in sorted(_validity.COUNTED))})"
# A valid answer with an accuracy, the accuracy figures' rows: parsed answers, and the parse
# failures a probe scores (counting_stars scores a reply with no list 0; recall scores none).
PARSED = f"error_kind IS NULL AND {COUNTED} AND accuracy IS NOT NULL"
# How many answers were invalid, and why ("thinking_exhausted 2, truncated 3").
INVALID_FIGURES = (
    f"count(*) FILTER (WHERE {INVALID}) AS invalid,\n"
    "           array_to_string(list_transform(list_sort(map_entries(\n"
    f"               histogram(validity) FILTER (WHERE {INVALID})\n"
    "           )), lambda e: e.key || ' ' || e.value), ', ') AS invalid_why"
)

# The axes of a recall cell config: its repeats (and epochs) differ in nothing else.
AXES: tuple[str, ...] = (
    "probe",
    "model",
    "length_unit",
    "length",
    "needle_count",
    "filler",
    "prompt_version",
    "placement",
    "region",
)
# A cell config within a probe's section: every grid axis but the probe and the repeat.
CONFIG_AXES: tuple[str, ...] = AXES[1:]
UNSTABLE_RANGE = 30.0
UNSTABLE_VARIABLE = "recall_unstable_range"

# Two-sided 95% Student t quantiles for 1..30 degrees of freedom; past 30 the
# Cornish-Fisher expansion below is within 0.001 of the exact value.
_T975 = (
    "[12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,\n"
    "                2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,\n"
    "                2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]"
)
_T975_LARGE = "1.959964 + 2.372271 / {df} + 2.822499 / ({df} * {df})"


def _t975(df: str) -> str:
    return (
        f"CASE WHEN {df} BETWEEN 1 AND 30\n           THEN {_T975}[{df}]\n"
        f"           WHEN {df} > 30 THEN {_T975_LARGE.format(df=df)} END"
    )


def _quoted(axes: Sequence[str]) -> str:
    return ", ".join(f'"{axis}"' for axis in axes)


def summary_sql(axes: Sequence[str], source: str = "results") -> str:
    """Answers, parse failures and accuracy figures of ``source`` grouped by ``axes``.

    ``ci95_low``/``ci95_high``: Student t interval of the mean, clipped to 0-100 (the SQL
    views' figure; the report replaces it with ``significance.with_intervals``).
    ``accuracy_range`` is max - min over the parsed answers (the repeats and epochs of one
    config when grouped by :data:`AXES`); ``unstable`` flags a range wider than the DuckDB
    variable ``recall_unstable_range`` (default 30 points). Every figure but ``errors``,
    ``invalid`` and ``invalid_why`` is over valid answers.
    """
    cols = _quoted(axes)
    parsed = PARSED
    return f"""
WITH per_group AS (
    SELECT {cols},
           count(DISTINCT epoch) AS epochs,
           count(DISTINCT "repeat") AS repeats,
           count(*) FILTER (WHERE error_kind IS NULL AND {COUNTED} AND parse_ok IS NOT NULL)
               AS answers,
           count(*) FILTER (WHERE error_kind IS NULL AND {COUNTED} AND NOT parse_ok)
               AS parse_failures,
           count(*) FILTER (WHERE {parsed}) AS graded,
           count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
           {INVALID_FIGURES},
           avg(accuracy) FILTER (WHERE {parsed}) AS mean_accuracy,
           median(accuracy) FILTER (WHERE {parsed}) AS median_accuracy,
           min(accuracy) FILTER (WHERE {parsed}) AS min_accuracy,
           max(accuracy) FILTER (WHERE {parsed}) AS max_accuracy,
           stddev_samp(accuracy) FILTER (WHERE {parsed}) AS sd_accuracy,
           avg(latency_s) FILTER (WHERE error_kind IS NULL) AS mean_latency_s
    FROM {source}
    GROUP BY {cols}
), with_interval AS (
    SELECT *,
           -- Student t interval of the mean: t(0.975, graded - 1) * sd / sqrt(graded)
           {_t975("(graded - 1)")}
           * sd_accuracy / sqrt(graded) AS ci95_half_width
    FROM per_group
)
SELECT {cols}, epochs, repeats, answers, parse_failures, graded, errors, invalid, invalid_why,
       parse_failures / nullif(answers, 0) AS parse_failure_rate,
       mean_accuracy,
       -- greatest/least skip NULLs: no interval (under 2 parsed answers) must stay NULL
       CASE WHEN ci95_half_width IS NOT NULL
            THEN greatest(mean_accuracy - ci95_half_width, 0.0) END AS ci95_low,
       CASE WHEN ci95_half_width IS NOT NULL
            THEN least(mean_accuracy + ci95_half_width, 100.0) END AS ci95_high,
       median_accuracy, min_accuracy, max_accuracy, sd_accuracy,
       max_accuracy - min_accuracy AS accuracy_range,
       coalesce(
           max_accuracy - min_accuracy
               > coalesce(getvariable('{UNSTABLE_VARIABLE}'), {UNSTABLE_RANGE}),
           false
       ) AS unstable,
       mean_latency_s
FROM with_interval
"""


def needle_counts_sql(
    axes: Sequence[str],
    counts: Mapping[str, str],
    source: str = "results",
    *,
    counted_only: bool = True,
) -> str:
    """``counts`` (name: aggregate over needle rows) per ``axes`` × needle index, over the
    needle outcomes of the results in ``source`` — the same figures as grouping the
    ``needle_outcomes`` view, computed the way 40 million needle rows allow.

    The results' configs (their ``axes`` values) are numbered first, so the join with the
    needle rows carries one integer per row and the grouping is by (config, needle index) only:
    a small hash table instead of one keyed by every axis. ``axes`` are the result's own values
    (model and probe from the answer, the rest from its cell), as in ``needle_outcomes``.
    ``counted_only``: the valid answers' needles only (False: every answer's, as the seed).
    """
    cols = _quoted(axes)
    where = f"WHERE {COUNTED}" if counted_only else ""
    same = " AND ".join(f'k."{a}" IS NOT DISTINCT FROM g."{a}"' for a in axes)
    figures = ",\n           ".join(f"{expr} AS {name}" for name, expr in counts.items())
    return f"""
WITH keys AS MATERIALIZED (
    SELECT run_id, epoch, cell_id, {cols} FROM {source} {where}
), configs AS MATERIALIZED (
    SELECT *, row_number() OVER () AS config_id FROM (SELECT DISTINCT {cols} FROM keys)
), keyed AS (
    SELECT k.run_id, k.epoch, k.cell_id, g.config_id FROM keys k JOIN configs g ON {same}
), counted AS (
    SELECT k.config_id, o.needle_index,
           {figures}
    FROM raw_needle_outcomes o
    JOIN keyed k ON k.run_id = o.run_id AND k.epoch = o.epoch AND k.cell_id = o.cell_id
    GROUP BY k.config_id, o.needle_index
)
SELECT {", ".join(f'g."{a}"' for a in axes)}, c.* EXCLUDE (config_id)
FROM counted c JOIN configs g USING (config_id)
"""


POSITION_ACCURACY_AXES = (
    "model",
    "probe",
    "length",
    "length_unit",
    "needle_count",
    "filler",
    "prompt_version",
)
_POSITION_ACCURACY_SQL = needle_counts_sql(
    POSITION_ACCURACY_AXES,
    {
        "frequency": "count(*) FILTER (WHERE o.in_lcs)",
        "total_records": "count(*)",
        "probability": "100.0 * count(*) FILTER (WHERE o.in_lcs) / count(*)",
    },
    counted_only=False,  # the seed's figure: every parsed answer, whatever its validity
).strip()
POSITION_ACCURACY_VIEW = f"""
-- The seed's position accuracy: per needle index, in how many parsed answers the LCS matched it
-- (needle_outcomes grouped by {", ".join(POSITION_ACCURACY_AXES)} and needle_index).
CREATE OR REPLACE VIEW position_accuracy AS
{_POSITION_ACCURACY_SQL};
"""

RECALL_STATS_VIEW = f"""
-- Per recall cell config (model × length × needle count × filler × prompt × placement ×
-- region): counts, accuracy figures over valid parsed answers (the invalid ones counted apart
-- in `invalid`, `invalid_why` saying why), the spread of its repeats and an `unstable` flag
-- (SET VARIABLE {UNSTABLE_VARIABLE} = 20; to change the threshold).
CREATE OR REPLACE VIEW recall_stats AS
{summary_sql(AXES).strip()};
"""


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
    con.execute(f"SET VARIABLE {UNSTABLE_VARIABLE} = {float(unstable_range)!r}")
    query = "SELECT * FROM recall_stats" if source == "results" else summary_sql(AXES, source)
    return con.sql(f"{query} ORDER BY {_order(AXES)}").pl()


def accuracy_summary(con: duckdb.DuckDBPyConnection, axes: Sequence[str]) -> pl.DataFrame:
    """The same figures as :func:`recall_stats`, grouped by any axes of ``results``."""
    return con.sql(f"{summary_sql(axes)} ORDER BY {_order(axes)}").pl()


def accuracy_by_length(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Mean accuracy (with its 95% interval) and parse failures per cell config."""
    return accuracy_summary(con, AXES)


def needle_rates(con: duckdb.DuckDBPyConnection, *, source: str = "results") -> pl.DataFrame:
    """Per needle index of every cell config: shares (0-100) of the parsed answers that
    recalled it in order (the seed's position accuracy), missed it, or misordered it."""
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


def hallucination_rates(con: duckdb.DuckDBPyConnection, *, source: str = "results") -> pl.DataFrame:
    """Hallucinated values per parsed answer, by the anchor interval they sit in.

    Every interval seen in a config is listed at every length of that config with parsed
    answers, with 0 where none fell in it, so a heatmap tells "none" from "not tested".
    """
    cols = _quoted(AXES)
    same = " AND ".join(f'p."{a}" IS NOT DISTINCT FROM i."{a}"' for a in AXES)
    variant = [a for a in AXES if a != "length"]
    same_variant = " AND ".join(f'p."{a}" IS NOT DISTINCT FROM k."{a}"' for a in variant)
    return con.sql(
        f"""
        WITH parsed AS (
            SELECT {cols}, count(*) AS parsed_answers
            FROM {source} WHERE {PARSED}
            GROUP BY {cols}
        ), found AS (
            -- the hallucinations view's rows (those of the answers in results), by config
            SELECT {", ".join(f'r."{a}"' for a in AXES)}, h.key_from, h.key_to,
                   count(*) AS hallucinations
            FROM raw_hallucinations h
            JOIN {source} r ON r.run_id = h.run_id AND r.epoch = h.epoch
                AND r.cell_id = h.cell_id
            WHERE r.{COUNTED}
            GROUP BY ALL
        ), intervals AS (
            SELECT DISTINCT {_quoted(variant)}, key_from, key_to FROM found
        ), grid AS (
            SELECT p.*, k.key_from, k.key_to
            FROM parsed p JOIN intervals k ON {same_variant}
        )
        SELECT {", ".join(f'p."{a}"' for a in AXES)}, p.key_from, p.key_to,
               concat(p.key_from, '–', p.key_to) AS interval,
               coalesce(i.hallucinations, 0) AS hallucinations,
               p.parsed_answers,
               coalesce(i.hallucinations, 0) / p.parsed_answers AS per_answer
        FROM grid p
        LEFT JOIN found i ON {same} AND p.key_from = i.key_from AND p.key_to = i.key_to
        ORDER BY {", ".join(f'p."{a}" NULLS FIRST' for a in AXES)}, p.key_from, p.key_to
        """
    ).pl()


def run_overview(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return con.sql(
        """
        SELECT run_id, epoch, config_name, started_at, ended_at, cells_total, cells_skipped,
               cells_dropped, cells_graded, cells_failed, needlescope_version, note
        FROM runs ORDER BY started_at DESC LIMIT 50
        """
    ).pl()


def error_counts(con: duckdb.DuckDBPyConnection, *, source: str = "results") -> pl.DataFrame:
    """Failed cells (those of ``failed_cells``) per model and error kind."""
    return con.sql(
        f"""
        SELECT model, error_kind, count(*) AS cells
        FROM {source} WHERE error_kind IS NOT NULL
        GROUP BY ALL ORDER BY cells DESC, model, error_kind
        """
    ).pl()
