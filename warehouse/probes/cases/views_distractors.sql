-- Distractors (near-miss statements beside a case's needles), over the shared views of
-- views.sql. An answer's grade names the distractor whose distinctive keywords it contains
-- (answers.detail.distractor, 1-based; NULL: none), for every answer of a cell that has
-- distractors.

-- One row per answer of a cell with distractors: which one the answer repeated, if any.
CREATE OR REPLACE VIEW distractor_results AS
SELECT r.run_id, r.epoch, r.cell_id, r.model, r.probe, r.length, r.length_unit, r.depth,
       r.filler, r.prompt_version, r."repeat",
       json_extract_string(r.probe_params, '$.case') AS "case",
       TRY_CAST(json_extract_string(r.detail, '$.distractor') AS BIGINT) AS distractor,
       (json_extract_string(r.probe_params, '$.distractors[*]'))[
           TRY_CAST(json_extract_string(r.detail, '$.distractor') AS BIGINT)] AS distractor_text,
       json_extract_string(r.detail, '$.distractors_matched') AS distractors_matched,
       r.accuracy, r.response, r.validity
FROM results r
-- the probes whose grading names distractors (cases.grade): the filter reaches the files
-- below results' window, where one on the answers' detail would read every answer first
WHERE r.probe IN ('cases', 'rag')
  AND r.error_kind IS NULL AND json_exists(r.detail, '$.distractor');

-- How often each distractor was repeated, per model, case and length (distractor NULL: none).
CREATE OR REPLACE VIEW distractor_counts AS
SELECT model, probe, "case", length, length_unit, distractor, distractor_text,
       count(*) AS answers
FROM distractor_results
GROUP BY ALL;
