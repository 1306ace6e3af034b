"""The figures' one definition, in SQL: which answers count, how a group of answers is
summarised, and the views generated from those definitions (``recall_stats``,
``position_accuracy``). The views read them at connect time; ``warehouse/stats`` runs the same
definitions over any grouping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from needlescope.grading import validity as _validity
from needlescope.warehouse.store.rollups import MEASURES

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


def quoted(axes: Sequence[str]) -> str:
    return ", ".join(f'"{axis}"' for axis in axes)


# How many answers of a group each count holds: recall_stats' counts (valid answers only, but
# for errors) and the seed's (accuracy_by_length: every answer as the seed counted it).
RECALL_COUNTS = {
    "answers": f"error_kind IS NULL AND {COUNTED} AND parse_ok IS NOT NULL",
    "parse_failures": f"error_kind IS NULL AND {COUNTED} AND NOT parse_ok",
    "graded": PARSED,
    "errors": "error_kind IS NOT NULL",
}
SEED_COUNTS = {
    "answers": "error_kind IS NULL AND parse_ok IS NOT NULL",
    "parse_failures": "error_kind IS NULL AND NOT parse_ok",
    "graded": "error_kind IS NULL AND accuracy IS NOT NULL",
    "errors": "error_kind IS NOT NULL",
}
# The answers the latency figure is over: every graded answer.
LATENCY = "error_kind IS NULL"


def summary_sql(axes: Sequence[str], source: str = "results") -> str:
    """Answers, parse failures and accuracy figures of ``source`` grouped by ``axes``.

    ``ci95_low``/``ci95_high``: Student t interval of the mean, clipped to 0-100 (the SQL
    views' figure; the report replaces it with ``significance.with_intervals``).
    ``accuracy_range`` is max - min over the parsed answers (the repeats and epochs of one
    config when grouped by :data:`AXES`); ``unstable`` flags a range wider than the DuckDB
    variable ``recall_unstable_range`` (default 30 points). Every figure but ``errors``,
    ``invalid`` and ``invalid_why`` is over valid answers.
    """
    cols = quoted(axes)
    parsed = PARSED
    counts = ",\n           ".join(
        f"count(*) FILTER (WHERE {rule}) AS {name}" for name, rule in RECALL_COUNTS.items()
    )
    return f"""
WITH per_group AS (
    SELECT {cols},
           count(DISTINCT epoch) AS epochs,
           count(DISTINCT "repeat") AS repeats,
           {counts},
           {INVALID_FIGURES},
           avg(accuracy) FILTER (WHERE {parsed}) AS mean_accuracy,
           median(accuracy) FILTER (WHERE {parsed}) AS median_accuracy,
           min(accuracy) FILTER (WHERE {parsed}) AS min_accuracy,
           max(accuracy) FILTER (WHERE {parsed}) AS max_accuracy,
           stddev_samp(accuracy) FILTER (WHERE {parsed}) AS sd_accuracy,
           avg(latency_s) FILTER (WHERE {LATENCY}) AS mean_latency_s
    FROM {source}
    GROUP BY {cols}
){summary_figures(axes)}"""


def summary_figures(axes: Sequence[str], *, then: str = "", joined: str = "") -> str:
    """The rest of :func:`summary_sql` after its ``per_group`` (counts and accuracy figures per
    group): the interval, the range and the ``unstable`` flag; ``then``: more columns after
    them, from ``joined`` (joins after ``FROM with_interval``)."""
    cols = quoted(axes)
    return f""", with_interval AS (
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
       mean_latency_s{then}
FROM with_interval {joined}
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
    cols = quoted(axes)
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


# The axes `results` takes from the answer; the others come from its cell.
_ANSWER_AXES = frozenset({"probe", "model"})


def result_axes(axes: Sequence[str], answer: str = "t") -> str:
    """``axes`` as `results` has them, selected from a tally (alias ``answer``) joined with its
    cell ``c``: probe and model from the answer, the region with a needle case's depth, the
    rest from the cell."""
    return ", ".join(
        f'{answer}."{a}"'
        if a in _ANSWER_AXES
        else "result_region(c.region, c.depth) AS region"
        if a == "region"
        else f'c."{a}"'
        for a in axes
    )


def tallied_counts_sql(
    axes: Sequence[str],
    counts: Mapping[str, str],
    *,
    counted_only: bool = True,
    where: str = "",
    per_needle: bool = True,
) -> str:
    """The figures :func:`needle_counts_sql` computes over ``results``, per ``axes`` × needle
    index, from ``needle_tallies`` (rollups.py: per cell and needle index, kept up to date):
    thousands of rows instead of every needle row. ``counts``: name → an expression over the
    tallies' sums ``needles``, ``in_lcs``, ``correct``, ``missing``, ``misorder``. ``where``: a
    further condition on the tallies (``t``) and their cells (``c``). ``per_needle=False``:
    per ``axes`` only, without a grouping by needle index."""
    picked = result_axes(axes)
    conditions = [f"t.{COUNTED}"] if counted_only else []
    conditions += [where] if where else []
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    figures = ",\n       ".join(f"{expr} AS {name}" for name, expr in counts.items())
    sums = ", ".join(f"sum(t.{m})::BIGINT AS {m}" for m in MEASURES)
    by_needle, needle = (", t.needle_index", ", needle_index") if per_needle else ("", "")
    return f"""
WITH summed AS (
    SELECT {picked}{by_needle}, {sums}
    FROM needle_tallies t JOIN cells c USING (cell_id)
    {where}
    GROUP BY ALL
)
SELECT {quoted(axes)}{needle},
       {figures}
FROM summed
"""


# The seed's grouping: accuracy_by_length's and position_accuracy's.
SEED_AXES = (
    "model",
    "probe",
    "length",
    "length_unit",
    "needle_count",
    "filler",
    "prompt_version",
)
_POSITION_ACCURACY_SQL = tallied_counts_sql(
    SEED_AXES,
    {
        "frequency": "in_lcs",
        "total_records": "needles",
        "probability": "100.0 * in_lcs / needles",
    },
    counted_only=False,  # the seed's figure: every parsed answer, whatever its validity
).strip()
POSITION_ACCURACY_VIEW = f"""
-- The seed's position accuracy: per needle index, in how many parsed answers the LCS matched it
-- (needle_outcomes grouped by {", ".join(SEED_AXES)} and needle_index), read
-- from the needle tallies.
CREATE OR REPLACE VIEW position_accuracy AS
{_POSITION_ACCURACY_SQL};
"""
