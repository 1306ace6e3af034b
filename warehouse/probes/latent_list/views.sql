-- latent_list views, over the shared views of views.sql (loaded before this file). The
-- program's operations, irrelevant statements and query are the cell's probe_params; how far
-- an answer tracked the list (consistent_with) is in answers.detail.

-- One row per latent_list cell per epoch that reached the model. success is NULL for a
-- failed request and an invalid answer; an answer with nothing to read is a parse failure and
-- no success. consistent_with: the most operations whose resulting state gives the answer (0:
-- the list as created; NULL: no state does, or nothing was read).
CREATE OR REPLACE VIEW latent_list_results AS
SELECT r.run_id, r.epoch, r.cell_id, r.context_id, r.model, r.prompt_version, r.filler,
       r."repeat", r.length, r.length_unit,
       TRY_CAST(json_extract_string(r.probe_params, '$.operations') AS BIGINT) AS operations,
       TRY_CAST(json_extract_string(r.probe_params, '$.irrelevant') AS BIGINT) AS irrelevant,
       json_extract_string(r.probe_params, '$.query') AS query,
       TRY_CAST(json_extract_string(r.facts, '$.index') AS BIGINT) AS "index",
       json_extract(r.expected, '$.answer') AS expected_answer,
       r.answered, r.accuracy AS score,
       CASE WHEN r.error_kind IS NULL AND r.validity IN ('valid', 'unknown')
            THEN coalesce(r.accuracy = 100, false) END AS success,
       TRY_CAST(json_extract_string(r.detail, '$.consistent_with') AS BIGINT)
           AS consistent_with,
       r.response, r.parse_ok, r.parse_error, r.validity, r.prompt_tokens, r.latency_s,
       r.error_kind, r.error, r.answered_at
FROM results r
WHERE r.probe = 'latent_list';

-- Score by operations × length (and irrelevant statements, query): the share of exact answers
-- among valid ones, parse failures included as misses, and how far the answers tracked the
-- list (the consistent prefix, in operations and as a share of them).
CREATE OR REPLACE VIEW latent_list_scores AS
SELECT model, length, length_unit, operations, irrelevant, query, prompt_version, filler,
       count(*) FILTER (WHERE success IS NOT NULL) AS answers,
       count(*) FILTER (WHERE success) AS successes,
       count(*) FILTER (WHERE success IS NOT NULL AND NOT parse_ok) AS parse_failures,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
       count(*) FILTER (WHERE validity NOT IN ('valid', 'unknown')) AS invalid,
       100 * avg(CAST(success AS DOUBLE)) AS mean_score,
       avg(consistent_with) FILTER (WHERE success IS NOT NULL) AS mean_consistent_with,
       100 * avg(CASE WHEN operations > 0 THEN coalesce(consistent_with, 0) / operations END)
           FILTER (WHERE success IS NOT NULL) AS mean_consistent_share
FROM latent_list_results
GROUP BY ALL;
