-- The warehouse's contract: analysis, charts and users read these views, never file paths.
-- {table:<name>} is replaced by a subquery reading the table's files as of the connection
-- (the append files and the compacted ones; see compaction.py).

-- Binding a view reads the footer of every file its glob matches, and views build on views:
-- keep the footers in memory (files are immutable: written once under a new name).
SET parquet_metadata_cache = true;

CREATE OR REPLACE VIEW raw_runs AS
SELECT * FROM {table:runs};

CREATE OR REPLACE VIEW runs AS
SELECT s.run_id, s.epoch, s.config_name, s.at AS started_at, e.at AS ended_at,
       s.needlescope_version, s.flow_run_id, s.config_json,
       coalesce(e.cells_total, s.cells_total) AS cells_total,
       coalesce(e.cells_skipped, s.cells_skipped) AS cells_skipped,
       coalesce(e.cells_dropped, s.cells_dropped) AS cells_dropped,
       e.cells_graded, e.cells_failed, e.cells_unsent, e.spent_tokens, e.spent_usd,
       coalesce(e.note, s.note) AS note
FROM raw_runs s LEFT JOIN raw_runs e ON e.run_id = s.run_id AND e.event = 'end'
WHERE s.event = 'start';

-- A cell is written once per run that built it; all copies are identical but for run_id, except
-- where a sweep fitted a known cell afresh (its remembered fit failed its check: another
-- tokenizer): that row, the latest, is what the next sweep checks its fit against
-- (Warehouse.remembered_fits); this view keeps showing the first.
-- Schema 5 (cases-depth) keeps a needle case's depth in a column of its own. A row written
-- before it has none there: its depth is in its facts (and was written as its region,
-- "depth 50%", in place of the cell's own region, which is 'whole' for every needle case).
CREATE OR REPLACE VIEW cells AS
SELECT * EXCLUDE (schema_version) REPLACE (
    CASE WHEN depth IS NULL AND starts_with(region, 'depth ') THEN 'whole' ELSE region END
        AS region,
    coalesce(
        depth,
        TRY_CAST(json_extract_string(facts, '$.depth') AS DOUBLE),
        TRY_CAST(regexp_extract(region, '^depth (.+)%$', 1) AS DOUBLE)
    ) AS depth
)
FROM {table:cells}
QUALIFY row_number() OVER (
    PARTITION BY cell_id ORDER BY (prompt_sha256 IS NULL), created_at, run_id
) = 1;

-- A result's region: a needle case's depth is a grid axis, which the statistics group by as
-- "depth 50%".
CREATE OR REPLACE MACRO result_region(region, depth) AS
    CASE WHEN depth IS NULL THEN region ELSE 'depth ' || format('{:g}', depth) || '%' END;

-- Every attempt that reached the warehouse: graded answers and failures (error_kind set).
CREATE OR REPLACE VIEW answers AS
SELECT * EXCLUDE (schema_version)
FROM {table:answers};

-- The attempts behind `results`' rows: those of a known cell. `results` picks one per (epoch,
-- cell), a graded one where there is one, so an epoch, probe or model has a row (a graded row)
-- in `results` exactly where it has an attempt (a graded attempt) here: what asks only which
-- epochs or probes there are reads this, without `results`' window over every attempt.
CREATE OR REPLACE VIEW result_attempts AS
SELECT a.* FROM answers a SEMI JOIN cells c ON c.cell_id = a.cell_id;

-- One row per (epoch, cell): its graded answer, or else its latest failure. The attempt is
-- picked before the join with cells (every attempt of a cell joins the same cells row), so the
-- window sorts answer columns only. A cell id fixes its probe and model: partitioning by them
-- as well picks the same rows and lets a filter on them (WHERE probe = 'goto') reach the files.
CREATE OR REPLACE VIEW results AS
WITH picked AS (
    SELECT * FROM answers
    QUALIFY row_number() OVER (
        PARTITION BY epoch, cell_id, probe, model
        ORDER BY (error_kind IS NULL) DESC, answered_at DESC, run_id DESC
    ) = 1
)
SELECT a.run_id, a.epoch, a.cell_id, c.context_id, a.probe, a.model, c.filler, c.placement,
       result_region(c.region, c.depth) AS region,
       c.depth, c.prompt_version, c.seed, c.length, c.length_unit, c.haystack_length,
       c.planned_tokens, a.prompt_tokens, a.completion_tokens, a.reasoning_tokens,
       a.finish_reason, c.needle_count, c."repeat", c.prompt_sha256, a.response,
       a.response_kept, a.parse_ok, a.parse_error,
       -- counting_stars' rule for a reply with no list (tallies.sql)
       result_accuracy(a.probe, a.error_kind, a.parse_ok, a.accuracy) AS accuracy,
       a.edit_distance, a.correct,
       a.missing, a.extra, a.wrong, a.uncounted, a.latency_s, a.error_kind, a.error, a.attempts,
       a.answered_at, a.model_version, c.expected, a.answered, c.probe_params, c.facts,
       a.detail, a.truncated, a.cost_usd, c.length_basis, c.length_budget, c.prompt_bytes,
       -- a judge's verdict (cases, rag); NULL when not judged or unreadable (U-NIAH's -1)
       TRY_CAST(json_extract_string(a.detail, '$.judge_score') AS INTEGER) AS judge_score,
       -- rows written before validity existed had no finish reason to judge by: unknown
       coalesce(a.validity, CASE WHEN a.error_kind IS NULL THEN 'unknown' END) AS validity,
       a.cached_tokens,
       a.response_repaired,
       -- what served the answer (schema step 7; NULL in older rows)
       a.system_fingerprint, a.service_tier, a.sampling, a.template_sha256, a.gguf_sha256,
       a.chat_template_sha256, a.llama_cpp,
       -- an imported answer's score by its own tool, unscaled (schema 8); NULL for ours
       a.original_score,
       -- cache writes and the batch that answered (schema 9; NULL in older rows)
       a.cache_write_tokens, a.cache_write_1h_tokens, a.batch_id,
       -- the prompt the provider counted is off the planned length by more than the tolerance
       (a.prompt_tokens IS NOT NULL AND c.planned_tokens IS NOT NULL
        AND abs(a.prompt_tokens - c.planned_tokens)
            > coalesce(getvariable('length_tolerance'), 0.02) * c.planned_tokens) AS length_off
FROM picked a JOIN cells c USING (cell_id);

CREATE OR REPLACE VIEW failed_cells AS
SELECT * FROM results WHERE error_kind IS NOT NULL;

-- The per-needle tables as written (one row per needle, invented value or extra copy of every
-- parsed answer, attempts that results did not pick included): the views below keep only the
-- rows of the answers in `results`.
CREATE OR REPLACE VIEW raw_needle_outcomes AS
SELECT * FROM {table:needle_outcomes};

CREATE OR REPLACE VIEW raw_hallucinations AS
SELECT * FROM {table:hallucinations};

CREATE OR REPLACE VIEW raw_duplicates AS
SELECT * FROM {table:duplicates};

-- Per-needle error analysis of the answers in `results` (parsed recall answers only).
CREATE OR REPLACE VIEW needle_outcomes AS
SELECT o.run_id, o.epoch, o.cell_id, r.model, r.probe, r.length, r.length_unit, r.needle_count,
       r.filler, r.prompt_version, r.placement, r.region, r."repeat", o.needle_index,
       o.expected, o.in_lcs, o.outcome, r.validity
FROM raw_needle_outcomes o
JOIN results r ON r.run_id = o.run_id AND r.epoch = o.epoch AND r.cell_id = o.cell_id;

CREATE OR REPLACE VIEW hallucinations AS
SELECT h.run_id, h.epoch, h.cell_id, r.model, r.probe, r.length, r.length_unit, r.needle_count,
       r.filler, r.prompt_version, h.answer_index, h.value, h.key_from, h.key_to
FROM raw_hallucinations h
JOIN results r ON r.run_id = h.run_id AND r.epoch = h.epoch AND r.cell_id = h.cell_id;

CREATE OR REPLACE VIEW duplicates AS
SELECT d.run_id, d.epoch, d.cell_id, r.model, r.probe, r.length, r.length_unit, r.needle_count,
       r.filler, r.prompt_version, d.answer_index, d.value, d.needle_indices
FROM raw_duplicates d
JOIN results r ON r.run_id = d.run_id AND r.epoch = d.epoch AND r.cell_id = d.cell_id;
