-- Goto (Little Retrieval Test) views, over the shared views of views.sql (loaded before this
-- file). n is the number of register lines (the cell's length); the order of the lines,
-- value_max, the block size of a block shuffle and the instruction's placement rule are in the
-- cell's probe_params, the file's layout in cells.facts, and where a wrong value came from in
-- answers.detail.

-- One row per goto cell per epoch that reached the model: its result, facts and grading detail.
-- success is NULL for a failed request and for an invalid answer (validity: truncated, refused,
-- …); a valid reply with no readable number counts as no success.
CREATE OR REPLACE VIEW goto_results AS
SELECT r.run_id, r.epoch, r.cell_id, r.context_id, r.model, r.prompt_version, r."repeat",
       r.length AS n,
       json_extract_string(c.probe_params, '$.order') AS "order",
       -- NULL: every line shuffled on its own (or an ordered file)
       TRY_CAST(json_extract_string(c.probe_params, '$.shuffle_block') AS BIGINT) AS shuffle_block,
       coalesce(json_extract_string(c.probe_params, '$.instruction_at'), 'random')
           AS instruction_at,
       TRY_CAST(json_extract_string(c.probe_params, '$.value_max') AS BIGINT) AS value_max,
       TRY_CAST(json_extract_string(c.facts, '$.k') AS BIGINT) AS k,
       TRY_CAST(json_extract_string(c.facts, '$.instruction_position') AS BIGINT)
           AS instruction_position,
       TRY_CAST(json_extract_string(c.facts, '$.target_position') AS BIGINT) AS target_position,
       TRY_CAST(json_extract_string(c.facts, '$.instruction_before_target') AS BOOLEAN)
           AS instruction_before_target,
       TRY_CAST(json_extract_string(c.facts, '$.distance') AS BIGINT) AS distance,
       TRY_CAST(r.expected AS BIGINT) AS expected,
       TRY_CAST(r.answered AS BIGINT) AS answered,
       r.response, r.parse_ok, r.parse_error, r.accuracy,
       CASE WHEN r.error_kind IS NULL AND r.validity IN ('valid', 'unknown') THEN coalesce(r.accuracy = 100, false)
       END AS success,
       r.validity,
       TRY_CAST(json_extract_string(a.detail, '$.answered_line') AS BIGINT) AS answered_line,
       TRY_CAST(json_extract_string(a.detail, '$.offset') AS BIGINT) AS "offset",
       TRY_CAST(json_extract_string(a.detail, '$.shown_offset') AS BIGINT) AS shown_offset,
       TRY_CAST(json_extract_string(a.detail, '$.answered_k') AS BOOLEAN) AS answered_k,
       r.prompt_tokens, r.latency_s, r.error_kind, r.error, r.answered_at
FROM results r
JOIN cells c USING (cell_id)
-- results does not carry the detail column: take it from the very answer results picked.
LEFT JOIN answers a
    ON a.epoch = r.epoch AND a.cell_id = r.cell_id AND a.run_id = r.run_id
   AND a.answered_at = r.answered_at AND a.error_kind IS NULL
WHERE r.probe = 'goto';

-- The seed's success rate per n: exact answers over all valid answers (parse failures
-- included; the invalid ones counted apart in `invalid`, with `invalid_why`), with a Wilson 95%
-- interval, which stays inside 0–1 even for a few repeats.
CREATE OR REPLACE VIEW goto_success AS
WITH counts AS (
    SELECT model, n, "order", shuffle_block, instruction_at, prompt_version,
           count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')) AS answers,
           count(*) FILTER (WHERE success) AS successes,
           count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown') AND NOT parse_ok)
               AS parse_failures,
           count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
           count(*) FILTER (WHERE validity NOT IN ('valid', 'unknown')) AS invalid,
           array_to_string(list_transform(list_sort(map_entries(
               histogram(validity) FILTER (WHERE validity NOT IN ('valid', 'unknown'))
           )), lambda e: e.key || ' ' || e.value), ', ') AS invalid_why
    FROM goto_results
    GROUP BY ALL
), rates AS (
    SELECT *,
           CAST(successes AS DOUBLE) / nullif(answers, 0) AS success_rate,
           3.8416 / nullif(answers, 0) AS z2n  -- 1.96², over the number of answers
    FROM counts
), wilson AS (
    SELECT *,
           1.96 * sqrt(success_rate * (1 - success_rate) / answers + z2n / (4 * answers)) AS half
    FROM rates
)
SELECT model, n, "order", shuffle_block, instruction_at, prompt_version, answers, successes,
       success_rate, parse_failures, errors, invalid, invalid_why,
       -- Exact at the ends: the formula gives 0 and 1 there, up to rounding.
       CASE WHEN answers = 0 THEN NULL WHEN successes = 0 THEN 0
            ELSE (success_rate + z2n / 2 - half) / (1 + z2n) END AS ci95_low,
       CASE WHEN answers = 0 THEN NULL WHEN successes = answers THEN 1
            ELSE (success_rate + z2n / 2 + half) / (1 + z2n) END AS ci95_high
FROM wilson;

-- One row per wrong (readable but not exact) answer: offset = answered_line − k, in line
-- numbers; NULL when the answered value is on no line of the file.
CREATE OR REPLACE VIEW goto_wrong_offsets AS
SELECT model, n, "order", shuffle_block, instruction_at, "offset", shown_offset, answered_line,
       k, answered, expected, answered_k, instruction_before_target, distance, prompt_version,
       epoch, cell_id
FROM goto_results
WHERE error_kind IS NULL AND parse_ok AND NOT success;  -- success is NULL when invalid
