-- Counting-Stars views, over the shared views of views.sql (loaded before this file).
-- The probe's own axes (language, order of the counts, reasoning variant) live in the cell's
-- probe_params JSON; needle_count is M, the number of star sentences. The paper's fixed counts
-- (counts: paper) have no order of their own: their "order" is 'paper'.

-- One row per graded or failed counting_stars cell, with the probe's axes as columns.
CREATE OR REPLACE VIEW stars_results AS
SELECT r.*,
       json_extract_string(c.probe_params, '$.language') AS language,
       coalesce(json_extract_string(c.probe_params, '$.order'),
                json_extract_string(c.probe_params, '$.counts')) AS "order",
       coalesce(CAST(json_extract(c.probe_params, '$.reasoning') AS BOOLEAN), false) AS reasoning
FROM results r JOIN cells c USING (cell_id)
WHERE r.probe = 'counting_stars';

-- One row per star of every answer (a reply with no list: every star missing; parse failures
-- graded before issue 13 have none). score is the star's share of the accuracy: 1 found,
-- 0 missing; the reasoning variant also 0.5 (both counts) and 0.25 (the mistaken one).
CREATE OR REPLACE VIEW stars_outcomes AS
SELECT o.*,
       json_extract_string(c.probe_params, '$.language') AS language,
       coalesce(json_extract_string(c.probe_params, '$.order'),
                json_extract_string(c.probe_params, '$.counts')) AS "order",
       coalesce(CAST(json_extract(c.probe_params, '$.reasoning') AS BOOLEAN), false) AS reasoning,
       CAST(CASE o.outcome
           WHEN 'correct' THEN 1 WHEN 'partial' THEN 0.5 WHEN 'mistaken' THEN 0.25 ELSE 0
       END AS DOUBLE) AS score
FROM needle_outcomes o JOIN cells c USING (cell_id)
WHERE o.probe = 'counting_stars';

-- The paper's heatmap: for each star (in context order) and length, the share of the valid
-- answers that found its count.
CREATE OR REPLACE VIEW stars_by_index AS
SELECT model, length, length_unit, needle_count AS stars, language, "order", reasoning, filler,
       prompt_version, needle_index,
       count(*) AS answers,
       count(*) FILTER (WHERE in_lcs) AS found,
       avg(CAST(in_lcs AS DOUBLE)) AS share_found,
       avg(score) AS mean_score
FROM stars_outcomes
WHERE validity IN ('valid', 'unknown')
GROUP BY ALL;

-- Accuracy by length, over valid answers (the invalid ones counted apart in `invalid`, with
-- `invalid_why`). A reply with no list scores 0 and stays in mean_accuracy (needlescope's
-- rule: every star missed); it is also counted as a parse failure, and mean_accuracy_parsed
-- leaves parse failures out. Over the lengths of each variant, mean_over_lengths averages the
-- per-length means and length_weighted_accuracy weights each length's mean by the length
-- itself (the paper's weighted score).
CREATE OR REPLACE VIEW stars_accuracy_by_length AS
WITH by_length AS (
    SELECT model, length, length_unit, needle_count AS stars, language, "order", reasoning,
           filler, prompt_version,
           count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')) AS answers,
           count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown') AND NOT parse_ok)
               AS parse_failures,
           count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown') AND accuracy IS NOT NULL)
               AS graded,
           count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
           count(*) FILTER (WHERE validity NOT IN ('valid', 'unknown')) AS invalid,
           array_to_string(list_transform(list_sort(map_entries(
               histogram(validity) FILTER (WHERE validity NOT IN ('valid', 'unknown'))
           )), lambda e: e.key || ' ' || e.value), ', ') AS invalid_why,
           avg(accuracy) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')) AS mean_accuracy,
           avg(accuracy) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown') AND parse_ok)
               AS mean_accuracy_parsed,
           stddev_samp(accuracy) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')) AS sd_accuracy,
           -- a parse failure graded before issue 13 has no figures: it found no star
           avg(CAST(coalesce(correct, 0) AS DOUBLE)) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown'))
               AS mean_stars_found,
           avg(CAST(coalesce(extra, 0) AS DOUBLE)) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown'))
               AS mean_out_of_truth
    FROM stars_results
    GROUP BY ALL
)
SELECT *,
       avg(mean_accuracy) OVER variant AS mean_over_lengths,
       sum(length * mean_accuracy) OVER variant
           / CAST(sum(CASE WHEN mean_accuracy IS NOT NULL THEN length END) OVER variant AS DOUBLE)
           AS length_weighted_accuracy
FROM by_length
WINDOW variant AS (
    PARTITION BY model, length_unit, stars, language, "order", reasoning, filler, prompt_version
);

-- One row per variant: the plain mean over lengths beside the length-weighted score.
CREATE OR REPLACE VIEW stars_scores AS
SELECT model, length_unit, stars, language, "order", reasoning, filler, prompt_version,
       count(*) FILTER (WHERE mean_accuracy IS NOT NULL) AS lengths,
       min(length) AS min_length, max(length) AS max_length,
       CAST(sum(answers) AS BIGINT) AS answers,
       CAST(sum(parse_failures) AS BIGINT) AS parse_failures,
       CAST(sum(errors) AS BIGINT) AS errors,
       CAST(sum(invalid) AS BIGINT) AS invalid,
       any_value(mean_over_lengths) AS mean_over_lengths,
       any_value(length_weighted_accuracy) AS length_weighted_accuracy
FROM stars_accuracy_by_length
GROUP BY ALL;
