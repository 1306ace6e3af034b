-- Needle cases (probes `cases`, mode llm, and `rag`): built on the shared views of views.sql.
-- The case is in cells.probe_params, the depth in cells.depth, the retrieval record (RAG) in
-- cells.facts, the keyword recall per needle and the judge's verdict in answers.detail (JSON
-- text). Rules (needlescope/judge.py): keyword recall calls an answer correct at accuracy >= 50,
-- the judge at score >= 7; they disagree when exactly one of them does.

-- One row per (epoch, cell) of a cases or rag result: the case, where its first needle sits,
-- and both grades. pair_id is the context id of the LLM cell a RAG cell was built from (an
-- LLM cell's own context id): equal pair_ids hold the same haystack with the same needles.
CREATE OR REPLACE VIEW cases_scores AS
WITH scored AS (
    SELECT r.epoch, r.run_id, r.cell_id, r.context_id,
           coalesce(json_extract_string(c.facts, '$.pair_id'), r.context_id) AS pair_id,
           r.model, r.probe,
           CASE WHEN r.probe = 'rag' THEN 'rag' ELSE 'llm' END AS mode,
           json_extract_string(c.probe_params, '$.mode') AS rag_mode,
           json_extract_string(c.probe_params, '$.case') AS "case",
           json_extract_string(c.probe_params, '$.case_sha256') AS case_sha256,
           r.filler, r.prompt_version, r.length, r.length_unit,
           c.depth,
           r.needle_count, r."repeat", r.response, r.parse_ok,
           r.accuracy AS keyword_accuracy,
           r.correct AS needles_recalled,
           r.judge_score,
           json_extract_string(a.detail, '$.judge_model') AS judge_model,
           json_extract_string(a.detail, '$.judge_reason') AS judge_reason,
           json_extract_string(a.detail, '$.judge_error') AS judge_error,
           r.latency_s, r.error_kind, r.error, r.answered_at, r.validity, c.facts, a.detail
    FROM results r
    JOIN cells c USING (cell_id)
    -- results does not carry the detail column: take it from the very answer results picked.
    LEFT JOIN answers a
        ON a.run_id = r.run_id AND a.epoch = r.epoch AND a.cell_id = r.cell_id
       AND a.answered_at = r.answered_at
    WHERE r.probe IN ('cases', 'rag')
)
SELECT * EXCLUDE (facts, detail),
       keyword_accuracy >= 50 AS keyword_correct,
       judge_score >= 7 AS judge_correct,
       coalesce((keyword_accuracy >= 50) <> (judge_score >= 7), false) AS disagreement,
       facts, detail
FROM scored;

-- Depth × length grid for heatmaps: valid answers over repeats (and epochs) of each setting
-- (the invalid ones counted apart in `invalid`, with `invalid_why`).
CREATE OR REPLACE VIEW cases_depth_length AS
SELECT model, "case", mode, rag_mode, filler, prompt_version, length, length_unit, depth,
       count(*) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')) AS answers,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
       count(*) FILTER (WHERE validity NOT IN ('valid', 'unknown')) AS invalid,
           array_to_string(list_transform(list_sort(map_entries(
               histogram(validity) FILTER (WHERE validity NOT IN ('valid', 'unknown'))
           )), lambda e: e.key || ' ' || e.value), ', ') AS invalid_why,
       avg(keyword_accuracy) FILTER (WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')) AS mean_keyword_accuracy,
       count(judge_score) FILTER (WHERE validity IN ('valid', 'unknown')) AS judged,
       avg(judge_score) FILTER (WHERE validity IN ('valid', 'unknown')) AS mean_judge_score,
       count(*) FILTER (WHERE disagreement AND validity IN ('valid', 'unknown')) AS disagreements
FROM cases_scores
GROUP BY ALL;

-- Each graded valid RAG answer next to the graded valid LLM answer of the same model and
-- pair_id (same case, length, depth, filler and repeat): from the same epoch when there is one,
-- else the latest. One row per (epoch, RAG cell).
CREATE OR REPLACE VIEW cases_llm_vs_rag AS
WITH graded AS (
    SELECT * FROM cases_scores WHERE error_kind IS NULL AND validity IN ('valid', 'unknown')
)
SELECT r.epoch, r.model, r."case", r.filler, r.length, r.length_unit, r.depth, r."repeat",
       r.rag_mode, r.pair_id, l.epoch AS llm_epoch, l.cell_id AS llm_cell_id,
       r.cell_id AS rag_cell_id,
       l.keyword_accuracy AS llm_keyword_accuracy, r.keyword_accuracy AS rag_keyword_accuracy,
       r.keyword_accuracy - l.keyword_accuracy AS rag_minus_llm,
       l.judge_score AS llm_judge_score, r.judge_score AS rag_judge_score
FROM graded r
JOIN graded l ON l.mode = 'llm' AND l.model = r.model AND l.pair_id = r.pair_id
WHERE r.mode = 'rag'
QUALIFY row_number() OVER (
    PARTITION BY r.epoch, r.cell_id ORDER BY (l.epoch = r.epoch) DESC, l.answered_at DESC
) = 1;

-- Where each needle went in a RAG cell: the chunk holding it, that chunk's rank for the
-- question (1 = most similar), whether it made it into the prompt whole (retrieved) or only
-- in part, and whether the answer recalled the needle (keyword recall).
CREATE OR REPLACE VIEW rag_retrieval AS
SELECT s.epoch, s.run_id, s.cell_id, s.pair_id, s.model, s."case", s.rag_mode, s.filler,
       s.length, s.length_unit, s.depth, s."repeat",
       TRY_CAST(n.value ->> 'needle' AS BIGINT) AS needle_index,
       TRY_CAST(n.value ->> 'chunk' AS BIGINT) AS chunk,
       TRY_CAST(n.value ->> 'rank' AS BIGINT) AS "rank",
       TRY_CAST(n.value ->> 'retrieved' AS BOOLEAN) AS retrieved,
       TRY_CAST(n.value ->> 'partial' AS BOOLEAN) AS partial,
       TRY_CAST(json_extract_string(
           s.detail, '$.needles[' || (TRY_CAST(n.value ->> 'needle' AS BIGINT) - 1) || '].recalled'
       ) AS BOOLEAN) AS recalled
FROM cases_scores s
CROSS JOIN json_each(s.facts, '$.retrieval') n
WHERE s.mode = 'rag';
