-- RULER's families (niah, variable_tracking, aggregation), over the shared views of views.sql
-- (loaded before this file). Their parameters are in the cell's probe_params (RULER's names,
-- with length_budget and answer_prefix_mode); what was planted (needles and their depths,
-- chains, distractors) in cells.facts; accuracy is RULER's string_match_all (0-100), and
-- answers.correct / missing / wrong count the expected strings found, those missed and the
-- distractors the answer holds. A cell's filler_chars holds its haystack units (RULER fits
-- whole units: sentences, words, list entries).

-- The per-string table as written, then its rows of the answers in `results`.
CREATE OR REPLACE VIEW raw_ruler_outcomes AS
SELECT * FROM {table:ruler_outcomes};

CREATE OR REPLACE VIEW ruler_outcomes AS
SELECT o.run_id, o.epoch, o.cell_id, r.model, r.probe, r.length, r.length_unit,
       r.prompt_version, r."repeat", o.role, o.string_index, o.text, o.found, r.validity
FROM raw_ruler_outcomes o
JOIN results r ON r.run_id = o.run_id AND r.epoch = o.epoch AND r.cell_id = o.cell_id
-- the families that write these rows: the filter reaches the files below results' window
WHERE r.probe IN ('niah', 'variable_tracking', 'aggregation');

-- What the three families' views share: one row per cell per epoch that reached the model.
-- score is the answer's accuracy as RULER scores it: every answer, a reply cut at RULER's
-- tokens_to_generate included (RULER grades what is there); NULL for a failed request.
-- valid says whether the answer measures recall (needlescope.validity): the statistics
-- (intervals, effective length) count valid answers only, as for every probe.
CREATE OR REPLACE VIEW ruler_results AS
SELECT r.run_id, r.epoch, r.cell_id, r.context_id, r.probe, r.model, r.length, r.length_unit,
       r.length_budget, r.prompt_version, r."repeat", r.filler,
       json_extract_string(c.probe_params, '$.answer_prefix_mode') AS answer_prefix_mode,
       c.filler_chars AS units, c.prompt_length,
       json_array_length(r.expected) AS expected_count, r.needle_count AS needles_planted,
       r.correct AS found, r.missing, r.wrong AS distractors_found,
       r.accuracy,
       CASE WHEN r.error_kind IS NULL THEN r.accuracy END AS score,
       r.validity IN ('valid', 'unknown') AS valid, r.validity, r.expected, r.response, r.prompt_tokens, r.completion_tokens, r.latency_s,
       r.error_kind, r.error, r.answered_at, c.probe_params, c.facts
FROM results r JOIN cells c USING (cell_id)
WHERE r.probe IN ('niah', 'variable_tracking', 'aggregation');

-- niah: the preset (NULL when the entry gave RULER's parameters), the parameters, and the
-- depth (%) of the needle holding the first expected value (the heatmap's row).
CREATE OR REPLACE VIEW niah_results AS
SELECT x.* EXCLUDE (probe_params, facts),
       json_extract_string(x.probe_params, '$.preset') AS preset,
       json_extract_string(x.probe_params, '$.type_haystack') AS type_haystack,
       json_extract_string(x.probe_params, '$.type_needle_k') AS type_needle_k,
       json_extract_string(x.probe_params, '$.type_needle_v') AS type_needle_v,
       TRY_CAST(json_extract_string(x.probe_params, '$.num_needle_k') AS BIGINT) AS num_needle_k,
       TRY_CAST(json_extract_string(x.probe_params, '$.num_needle_v') AS BIGINT) AS num_needle_v,
       TRY_CAST(json_extract_string(x.probe_params, '$.num_needle_q') AS BIGINT) AS num_needle_q,
       TRY_CAST(json_extract_string(x.facts, '$.needle_depth') AS DOUBLE) AS depth,
       json_extract_string(x.facts, '$.query') AS query
FROM ruler_results x
WHERE x.probe = 'niah';

CREATE OR REPLACE VIEW vt_results AS
SELECT x.* EXCLUDE (probe_params, facts),
       TRY_CAST(json_extract_string(x.probe_params, '$.num_chains') AS BIGINT) AS num_chains,
       TRY_CAST(json_extract_string(x.probe_params, '$.num_hops') AS BIGINT) AS num_hops,
       TRY_CAST(json_extract_string(x.probe_params, '$.fewshot') AS BOOLEAN) AS fewshot,
       TRY_CAST(json_extract_string(x.facts, '$.values[0]') AS BIGINT) AS query_value
FROM ruler_results x
WHERE x.probe = 'variable_tracking';

CREATE OR REPLACE VIEW aggregation_results AS
SELECT x.* EXCLUDE (probe_params, facts),
       json_extract_string(x.probe_params, '$.task') AS task,
       TRY_CAST(json_extract_string(x.probe_params, '$.num_cw') AS BIGINT) AS num_cw,
       TRY_CAST(json_extract_string(x.probe_params, '$.freq_cw') AS BIGINT) AS freq_cw,
       TRY_CAST(json_extract_string(x.probe_params, '$.freq_ucw') AS BIGINT) AS freq_ucw,
       TRY_CAST(json_extract_string(x.probe_params, '$.alpha') AS DOUBLE) AS alpha,
       TRY_CAST(json_extract_string(x.probe_params, '$.vocab_size') AS BIGINT) AS vocab_size
FROM ruler_results x
WHERE x.probe = 'aggregation';

-- Each task's score by length, as RULER reports it: the mean accuracy of its answers, rounded
-- to 2 decimals (task: the niah preset, vt, cwe or fwe); score_valid over the valid answers
-- alone, and the invalid ones counted (invalid_why: their validities).
CREATE OR REPLACE VIEW ruler_scores AS
WITH tasks AS (
    SELECT model, 'niah' AS family, coalesce(preset, 'niah') AS task, length, length_budget,
           prompt_version, score, valid, error_kind, validity FROM niah_results
    UNION ALL
    SELECT model, 'variable_tracking', 'vt', length, length_budget, prompt_version, score,
           valid, error_kind, validity FROM vt_results
    UNION ALL
    SELECT model, 'aggregation', task, length, length_budget, prompt_version, score,
           valid, error_kind, validity FROM aggregation_results
)
SELECT model, family, task, length, length_budget, prompt_version,
       count(score) AS answers,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
       count(*) FILTER (WHERE NOT valid) AS invalid,
       array_to_string(list_transform(list_sort(map_entries(
           histogram(validity) FILTER (WHERE NOT valid)
       )), lambda e: e.key || ' ' || e.value), ', ') AS invalid_why,
       round(avg(score), 2) AS score,
       round(avg(score) FILTER (WHERE valid), 2) AS score_valid
FROM tasks
GROUP BY ALL;
