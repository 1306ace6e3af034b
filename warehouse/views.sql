-- The warehouse's contract: analysis, charts and users read these views, never file paths.
-- {parquet} is replaced by the absolute path of the warehouse's parquet/ folder.

CREATE OR REPLACE VIEW raw_runs AS
SELECT * FROM read_parquet('{parquet}/runs/**/*.parquet', union_by_name = true);

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

-- A cell is written once per run that built it; all copies are identical but for run_id.
CREATE OR REPLACE VIEW cells AS
SELECT * EXCLUDE (schema_version)
FROM read_parquet('{parquet}/cells/**/*.parquet', union_by_name = true)
QUALIFY row_number() OVER (
    PARTITION BY cell_id ORDER BY (prompt_sha256 IS NULL), created_at, run_id
) = 1;

-- Every attempt that reached the warehouse: graded answers and failures (error_kind set).
CREATE OR REPLACE VIEW answers AS
SELECT * EXCLUDE (schema_version)
FROM read_parquet('{parquet}/answers/**/*.parquet', union_by_name = true);

-- One row per (epoch, cell): its graded answer, or else its latest failure.
CREATE OR REPLACE VIEW results AS
SELECT a.run_id, a.epoch, a.cell_id, c.context_id, a.probe, a.model, c.filler, c.placement,
       c.region, c.prompt_version, c.seed, c.length, c.length_unit, c.haystack_length,
       c.planned_tokens, a.prompt_tokens, a.completion_tokens, a.reasoning_tokens,
       a.finish_reason, c.needle_count, c."repeat", c.prompt_sha256, a.response,
       a.response_kept, a.parse_ok, a.parse_error, a.accuracy, a.edit_distance, a.correct,
       a.missing, a.extra, a.wrong, a.latency_s, a.error_kind, a.error, a.attempts,
       a.answered_at, a.model_version, c.expected, a.answered, c.probe_params, c.facts,
       a.detail, a.truncated, a.cost_usd, c.length_basis,
       -- the prompt the provider counted is off the planned length by more than the tolerance
       (a.prompt_tokens IS NOT NULL AND c.planned_tokens IS NOT NULL
        AND abs(a.prompt_tokens - c.planned_tokens)
            > coalesce(getvariable('length_tolerance'), 0.02) * c.planned_tokens) AS length_off
FROM answers a JOIN cells c USING (cell_id)
QUALIFY row_number() OVER (
    PARTITION BY a.epoch, a.cell_id
    ORDER BY (a.error_kind IS NULL) DESC, a.answered_at DESC
) = 1;

CREATE OR REPLACE VIEW failed_cells AS
SELECT * FROM results WHERE error_kind IS NOT NULL;

-- Average accuracy by length and needle count: the seed's summary, with its counts.
-- Parse failures count as answers but are excluded from the accuracy figures (the seed's rule).
CREATE OR REPLACE VIEW accuracy_by_length AS
SELECT model, probe, length, length_unit, needle_count, filler, prompt_version,
       count(*) FILTER (WHERE error_kind IS NULL) AS answers,
       count(*) FILTER (WHERE error_kind IS NULL AND NOT parse_ok) AS parse_failures,
       count(*) FILTER (WHERE error_kind IS NULL AND parse_ok) AS graded,
       count(*) FILTER (WHERE error_kind IS NOT NULL) AS errors,
       avg(accuracy) FILTER (WHERE parse_ok) AS mean_accuracy,
       median(accuracy) FILTER (WHERE parse_ok) AS median_accuracy,
       min(accuracy) FILTER (WHERE parse_ok) AS min_accuracy,
       max(accuracy) FILTER (WHERE parse_ok) AS max_accuracy,
       stddev_samp(accuracy) FILTER (WHERE parse_ok) AS sd_accuracy,
       avg(latency_s) FILTER (WHERE error_kind IS NULL) AS mean_latency_s
FROM results
GROUP BY ALL;

-- Per-needle error analysis of the answers in `results` (parsed recall answers only).
CREATE OR REPLACE VIEW needle_outcomes AS
SELECT o.run_id, o.epoch, o.cell_id, r.model, r.probe, r.length, r.length_unit, r.needle_count,
       r.filler, r.prompt_version, r.placement, r.region, r."repeat", o.needle_index,
       o.expected, o.in_lcs, o.outcome
FROM read_parquet('{parquet}/needle_outcomes/**/*.parquet', union_by_name = true) o
JOIN results r ON r.run_id = o.run_id AND r.epoch = o.epoch AND r.cell_id = o.cell_id;

CREATE OR REPLACE VIEW hallucinations AS
SELECT h.run_id, h.epoch, h.cell_id, r.model, r.probe, r.length, r.length_unit, r.needle_count,
       r.filler, r.prompt_version, h.answer_index, h.value, h.key_from, h.key_to
FROM read_parquet('{parquet}/hallucinations/**/*.parquet', union_by_name = true) h
JOIN results r ON r.run_id = h.run_id AND r.epoch = h.epoch AND r.cell_id = h.cell_id;

CREATE OR REPLACE VIEW duplicates AS
SELECT d.run_id, d.epoch, d.cell_id, r.model, r.probe, r.length, r.length_unit, r.needle_count,
       r.filler, r.prompt_version, d.answer_index, d.value, d.needle_indices
FROM read_parquet('{parquet}/duplicates/**/*.parquet', union_by_name = true) d
JOIN results r ON r.run_id = d.run_id AND r.epoch = d.epoch AND r.cell_id = d.cell_id;

-- The seed's position accuracy: per needle index, in how many parsed answers the LCS matched it.
CREATE OR REPLACE VIEW position_accuracy AS
SELECT model, probe, length, length_unit, needle_count, filler, prompt_version, needle_index,
       count(*) FILTER (WHERE in_lcs) AS frequency,
       count(*) AS total_records,
       100.0 * count(*) FILTER (WHERE in_lcs) / count(*) AS probability
FROM needle_outcomes
GROUP BY ALL;
