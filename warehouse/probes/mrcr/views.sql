-- MRCR views, over the shared views of views.sql (loaded before this file). A cell's length is
-- its target; the conversation sent is the most filler pairs within it (planned_tokens: its
-- measured length), the number of repeats of the asked request is the cell's needle_count, and
-- the grade's nonce hit and reproduced occurrence are in answers.detail.

-- One row per mrcr cell per epoch that reached the model. bin_low / bin_high: the doubling
-- bin of OpenAI MRCR's reports ([4096, 8192), …; below 4,096 the bins go on halving) that
-- holds the prompt's measured length. score is OpenAI's ratio × 100 (0 without the nonce).
CREATE OR REPLACE VIEW mrcr_results AS
WITH sized AS (
    SELECT r.*, coalesce(r.planned_tokens, r.prompt_tokens) AS measured_tokens
    FROM results r
    WHERE r.probe = 'mrcr'
)
SELECT r.run_id, r.epoch, r.cell_id, r.context_id, r.model, r.prompt_version, r."repeat",
       r.length, r.length_unit, r.needle_count AS needles, r.measured_tokens,
       CASE WHEN r.measured_tokens > 0
            THEN CAST(1 AS BIGINT) << CAST(floor(log2(r.measured_tokens)) AS INTEGER) END
           AS bin_low,
       CASE WHEN r.measured_tokens > 0
            THEN CAST(2 AS BIGINT) << CAST(floor(log2(r.measured_tokens)) AS INTEGER) END
           AS bin_high,
       TRY_CAST(json_extract_string(r.facts, '$.ask') AS BIGINT) AS ask,
       json_extract_string(r.facts, '$.form') AS form,
       json_extract_string(r.facts, '$.topic') AS topic,
       TRY_CAST(json_extract_string(r.facts, '$.filler_pairs') AS BIGINT) AS filler_pairs,
       r.accuracy AS score,
       TRY_CAST(json_extract_string(r.detail, '$.nonce_hit') AS BOOLEAN) AS nonce_hit,
       -- the occurrence the answer resembles more than the asked one; NULL: the asked one
       TRY_CAST(json_extract_string(r.detail, '$.wrong_occurrence') AS BIGINT)
           AS wrong_occurrence,
       TRY_CAST(json_extract_string(r.detail, '$.closest') AS BIGINT) AS closest,
       r.response, r.parse_ok, r.parse_error, r.validity, r.prompt_tokens, r.latency_s,
       r.error_kind, r.error, r.answered_at
FROM sized r;

-- Score and nonce-hit rate by length × needles: over valid answers (the invalid ones counted
-- apart), as OpenAI MRCR reports them.
CREATE OR REPLACE VIEW mrcr_scores AS
SELECT model, length, length_unit, needles,
       min(bin_low) AS bin_low, max(bin_high) AS bin_high,
       count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown'))
           AS answers,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
       count(*) FILTER (WHERE validity NOT IN ('valid', 'unknown')) AS invalid,
       avg(score) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown'))
           AS mean_score,
       100 * avg(CAST(nonce_hit AS DOUBLE))
           FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown'))
           AS nonce_hit_rate,
       count(*) FILTER (WHERE wrong_occurrence IS NOT NULL
                          AND error_kind IS NULL AND validity IN ('valid', 'unknown'))
           AS wrong_occurrences,
       avg(measured_tokens) AS mean_measured_tokens
FROM mrcr_results
GROUP BY ALL;
