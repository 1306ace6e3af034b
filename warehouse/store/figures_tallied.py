"""The answers' figures (figures.py defines them over `results` rows) computed from the answer
tallies (tallies.sql: per cell and accuracy value, kept up to date by the rollups), so
``accuracy_by_length`` and ``recall_stats`` read thousands of rows instead of every answer.

Each accuracy value is a tally key, so every figure is the one `results` gives: counts and
min/max exactly, the median exactly (the middle values of the sorted counts, averaged as DuckDB
averages them), the mean and standard deviation from the weighted values (equal to the last
bits of rounding). ``epochs`` comes from the (epoch, config) pairs the rollups keep.
``tallied_groups_sql`` is over 60 lines: it is one SQL statement, read best in one piece.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from needlescope.warehouse.store.figures import (
    AXES,
    INVALID,
    LATENCY,
    PARSED,
    RECALL_COUNTS,
    SEED_AXES,
    SEED_COUNTS,
    quoted,
    result_axes,
    summary_figures,
)


def tallied_groups_sql(
    axes: Sequence[str],
    counts: Mapping[str, str],
    figures_over: str,
    *,
    epochs: bool,
    where: str = "",
) -> str:
    """CTEs ending in ``per_group``: per ``axes`` (a subset of :data:`AXES`), ``counts``
    (name: which answers), the accuracy figures over the answers ``figures_over`` selects,
    ``invalid``/``invalid_why``, the mean latency, ``repeats`` and (``epochs``) ``epochs``.
    The tallies' rows carry the columns the figures' rules name (``error_kind`` stands for
    "not graded"), so the rules are figures.py's own. ``where``: a condition on the tallies
    (alias ``t``: probe, model, validity, ...) and their cells (``c``)."""
    unknown = set(axes) - set(AXES)
    if unknown:
        raise ValueError(f"not an axis of the answer tallies: {sorted(unknown)}")
    cols = quoted(axes)
    same = " AND ".join(f'k."{a}" IS NOT DISTINCT FROM g."{a}"' for a in axes)
    sums = ",\n           ".join(
        f"coalesce(sum(answers) FILTER (WHERE {rule}), 0)::BIGINT AS {name}"
        for name, rule in counts.items()
    )
    epoch_cte = (
        f"""
), epochs AS (
    SELECT g.config_id, count(DISTINCT k.epoch) AS epochs
    FROM result_epochs k JOIN configs g ON {same}
    GROUP BY g.config_id"""
        if epochs
        else ""
    )
    epoch_col = "e.epochs, " if epochs else ""
    epoch_join = "LEFT JOIN epochs e USING (config_id)" if epochs else ""
    return f"""
WITH base AS MATERIALIZED (
    SELECT {result_axes(axes)}, c."repeat", t.validity,
           CASE WHEN NOT t.graded THEN 'error' END AS error_kind,
           t.parse_ok, t.accuracy, t.answers, t.latencies, t.latency_sum
    FROM answer_tallies t JOIN cells c USING (cell_id)
    {f"WHERE {where}" if where else ""}
), configs AS MATERIALIZED (
    SELECT *, row_number() OVER () AS config_id FROM (SELECT DISTINCT {cols} FROM base)
), keyed AS MATERIALIZED (
    SELECT g.config_id, k.* EXCLUDE ({cols}) FROM base k JOIN configs g ON {same}
), counted AS (
    SELECT config_id,
           count(DISTINCT "repeat") AS repeats,
           {sums},
           coalesce(sum(answers) FILTER (WHERE {INVALID}), 0)::BIGINT AS invalid,
           sum(latency_sum) FILTER (WHERE {LATENCY})
               / nullif(sum(latencies) FILTER (WHERE {LATENCY}), 0) AS mean_latency_s
    FROM keyed
    GROUP BY config_id
), why AS (
    SELECT config_id, string_agg(validity || ' ' || n, ', ' ORDER BY validity) AS invalid_why
    FROM (SELECT config_id, validity, sum(answers)::BIGINT AS n
          FROM keyed WHERE {INVALID} GROUP BY ALL)
    GROUP BY config_id
), valued AS MATERIALIZED (
    -- the answers the accuracy figures are over, per distinct accuracy value
    SELECT config_id, accuracy, sum(answers)::BIGINT AS n
    FROM keyed WHERE ({figures_over}) AND accuracy IS NOT NULL
    GROUP BY ALL
), ranked AS (
    SELECT *, sum(n) OVER (PARTITION BY config_id ORDER BY accuracy) AS upto,
           sum(n) OVER (PARTITION BY config_id) AS total
    FROM valued
), moments AS (
    SELECT config_id, sum(n) AS valued, sum(n * accuracy) / sum(n) AS mean_accuracy,
           min(accuracy) AS min_accuracy, max(accuracy) AS max_accuracy,
           -- the two middle values (0-based positions (total - 1) // 2 and total // 2)
           (min(accuracy) FILTER (WHERE upto > (total - 1) // 2)
            + min(accuracy) FILTER (WHERE upto > total // 2)) / 2 AS median_accuracy
    FROM ranked
    GROUP BY config_id
), spread AS (
    SELECT v.config_id,
           CASE WHEN m.valued > 1
                THEN sqrt(sum(v.n * (v.accuracy - m.mean_accuracy) ** 2) / (m.valued - 1))
           END AS sd_accuracy
    FROM valued v JOIN moments m USING (config_id)
    GROUP BY v.config_id, m.valued{epoch_cte}
), per_group AS (
    SELECT {", ".join(f'g."{a}"' for a in axes)}, g.config_id, {epoch_col}cnt.* EXCLUDE (config_id),
           w.invalid_why, m.mean_accuracy, m.median_accuracy, m.min_accuracy, m.max_accuracy,
           s.sd_accuracy
    FROM configs g
    JOIN counted cnt USING (config_id)
    LEFT JOIN why w USING (config_id)
    LEFT JOIN moments m USING (config_id)
    LEFT JOIN spread s USING (config_id)
    {epoch_join}
)"""


def tallied_summary_sql(axes: Sequence[str], where: str = "", *, values: bool = False) -> str:
    """figures.summary_sql over ``results`` grouped by ``axes`` (a subset of :data:`AXES`),
    from the answer tallies (``where``: as :func:`tallied_groups_sql`'s). ``values``: each
    group also has ``valued`` (:data:`VALUE_LISTS`: each distinct accuracy with its count, the
    multiset a bootstrap resamples; null without graded answers): its interval needs no
    second query."""
    groups = tallied_groups_sql(axes, RECALL_COUNTS, PARSED, epochs=True, where=where)
    if not values:
        return groups + summary_figures(axes)
    lists = "LEFT JOIN lists USING (config_id)"
    return groups + VALUE_LISTS + summary_figures(axes, then=", valued", joined=lists)


# After tallied_groups_sql: per config_id, its accuracies with their counts, ascending.
VALUE_LISTS = """, lists AS (
    SELECT config_id, list({'accuracy': accuracy, 'n': n} ORDER BY accuracy) AS valued
    FROM valued GROUP BY config_id
)"""


# `results` rows per (epoch, config): the rollup's, and the fresh pairs' configs from cells.
RESULT_EPOCHS_VIEW = f"""
CREATE OR REPLACE VIEW result_epochs AS
SELECT epoch, {quoted(AXES)} FROM tally_epochs WHERE cell_id IS NULL
UNION ALL
SELECT k.epoch, {result_axes(AXES, answer="k")}
FROM (SELECT epoch, cell_id, probe, model FROM tally_epochs WHERE cell_id IS NOT NULL
      UNION ALL SELECT epoch, cell_id, probe, model FROM new_epochs) k
JOIN cells c USING (cell_id);
"""

ACCURACY_BY_LENGTH_VIEW = f"""
-- Average accuracy by length and needle count: the seed's summary, with its counts.
-- The accuracy figures are over the answers that have an accuracy (`graded`). A recall parse
-- failure has none (the seed's rule: counted as an answer, excluded from the mean); a
-- counting_stars reply with no list scores 0 and stays in the mean (needlescope's rule). An
-- empty recall reply (parse_ok NULL) is neither, and an answer the seed's analysis could not
-- order (accuracy NULL, `uncounted` says why) is an answer but not graded.
-- Seed-exact: every answer counts as the seed counted it, whatever its validity (a truncated
-- reply that does not parse is a parse failure); `invalid` / `invalid_why` say how many of
-- them do not measure recall, and recall_stats gives the figures over valid answers only.
-- Read from the answer tallies (figures_tallied.py).
CREATE OR REPLACE VIEW accuracy_by_length AS
{tallied_groups_sql(SEED_AXES, SEED_COUNTS, LATENCY, epochs=False).strip()}
SELECT {quoted(SEED_AXES)}, answers, parse_failures, graded, errors, mean_accuracy,
       median_accuracy, min_accuracy, max_accuracy, sd_accuracy, mean_latency_s, invalid,
       invalid_why
FROM per_group;
"""

RECALL_STATS_VIEW = f"""
-- Per recall cell config (model × length × needle count × filler × prompt × placement ×
-- region): counts, accuracy figures over valid parsed answers (the invalid ones counted apart
-- in `invalid`, `invalid_why` saying why), the spread of its repeats and an `unstable` flag
-- (SET VARIABLE recall_unstable_range = 20; to change the threshold). Read from the answer
-- tallies (figures_tallied.py).
CREATE OR REPLACE VIEW recall_stats AS
{tallied_summary_sql(AXES).strip()};
"""
