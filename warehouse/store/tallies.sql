-- Per-needle and per-answer counts of the answers `results` picks (see rollups.py): the
-- rollup's tallies of the files its generation covers, plus the effect of the fresh files
-- (appended since) — their new picks added, and any covered pick they displace taken away.
-- Without a usable generation every file is fresh: the same counts, from the raw rows.
-- rollups.py fills its placeholders per connection (views_sql does not read this file).

-- A result's accuracy (`results` reads it through this macro too): counting_stars scores a
-- reply with no list 0 (every star missed); its answers graded before that rule (issue 13)
-- were stored without an accuracy.
CREATE OR REPLACE MACRO result_accuracy(probe, error_kind, parse_ok, accuracy) AS
    CASE WHEN probe = 'counting_stars' AND error_kind IS NULL AND NOT parse_ok
         THEN coalesce(accuracy, 0.0) ELSE accuracy END;

CREATE OR REPLACE VIEW fresh_attempts AS
SELECT run_id, epoch, cell_id, probe, model, answered_at, error_kind IS NULL AS graded,
       error_kind, coalesce(validity, CASE WHEN error_kind IS NULL THEN 'unknown' END) AS validity,
       parse_ok, result_accuracy(probe, error_kind, parse_ok, accuracy) AS accuracy, latency_s
FROM {fresh:answers};

CREATE OR REPLACE VIEW fresh_needle_rows AS
SELECT * FROM {fresh:needle_outcomes};

CREATE OR REPLACE VIEW fresh_invented_rows AS
SELECT * FROM {fresh:hallucinations};

-- The attempts the rollup covers (their pick's ordering key), one narrow row each.
CREATE OR REPLACE VIEW tally_attempts AS
SELECT * FROM {rollup:attempts};

-- Which attempt of an (epoch, cell) counts: `results`' rule (views.sql), on these columns.
-- One row per (epoch, cell) whose pick the fresh files change: the new pick, and the covered
-- pick it displaces (old_run NULL: the (epoch, cell) is new).
CREATE OR REPLACE VIEW pick_changes AS
WITH fresh AS MATERIALIZED (
    SELECT * FROM fresh_attempts
), touched AS MATERIALIZED (
    SELECT DISTINCT epoch, cell_id FROM fresh
), old AS MATERIALIZED (
    SELECT a.* FROM tally_attempts a
    SEMI JOIN touched t ON a.epoch = t.epoch AND a.cell_id = t.cell_id
), old_pick AS MATERIALIZED (
    SELECT * FROM old
    QUALIFY row_number() OVER (
        PARTITION BY epoch, cell_id ORDER BY graded DESC, answered_at DESC, run_id DESC
    ) = 1
), new_pick AS MATERIALIZED (
    SELECT * FROM (SELECT * FROM old UNION ALL BY NAME SELECT * FROM fresh)
    QUALIFY row_number() OVER (
        PARTITION BY epoch, cell_id ORDER BY graded DESC, answered_at DESC, run_id DESC
    ) = 1
)
SELECT n.epoch, n.cell_id,
       n.run_id AS new_run, n.graded AS new_graded, n.error_kind AS new_error_kind,
       n.probe AS new_probe,
       n.model AS new_model, n.validity AS new_validity, n.parse_ok AS new_parse_ok,
       n.accuracy AS new_accuracy, n.latency_s AS new_latency_s,
       o.run_id AS old_run, o.graded AS old_graded, o.error_kind AS old_error_kind,
       o.probe AS old_probe,
       o.model AS old_model, o.validity AS old_validity, o.parse_ok AS old_parse_ok,
       o.accuracy AS old_accuracy, o.latency_s AS old_latency_s
FROM new_pick n LEFT JOIN old_pick o USING (epoch, cell_id)
WHERE o.run_id IS NULL OR o.run_id <> n.run_id OR o.answered_at <> n.answered_at;

-- The needle rows of the changed picks, signed: what they add to the covered tallies.
CREATE OR REPLACE VIEW tally_delta AS
WITH changed AS MATERIALIZED (
    SELECT * FROM pick_changes
), added AS MATERIALIZED (
    SELECT epoch, cell_id, new_run AS run_id, new_probe AS probe, new_model AS model,
           new_validity AS validity
    FROM changed WHERE new_graded
), displaced AS MATERIALIZED (
    SELECT epoch, cell_id, old_run AS run_id, old_probe AS probe, old_model AS model,
           old_validity AS validity
    FROM changed WHERE old_graded
), signed AS (
    -- a fresh pick's needle rows are in fresh files, or in covered ones when the rollup
    -- recorded them as pending (covered before their answer was written)
    SELECT o.cell_id, a.probe, a.model, o.needle_index, a.validity, 1 AS sign, o.in_lcs,
           o.outcome
    FROM fresh_needle_rows o
    JOIN added a ON a.run_id = o.run_id AND a.epoch = o.epoch AND a.cell_id = o.cell_id
    UNION ALL
    SELECT o.cell_id, a.probe, a.model, o.needle_index, a.validity, 1, o.in_lcs, o.outcome
    FROM {covered:needle_outcomes} o
    JOIN (SELECT * FROM added SEMI JOIN {rollup:pending} p
              ON added.run_id = p.run_id AND added.epoch = p.epoch
             AND added.cell_id = p.cell_id) a
      ON a.run_id = o.run_id AND a.epoch = o.epoch AND a.cell_id = o.cell_id
    UNION ALL
    SELECT o.cell_id, d.probe, d.model, o.needle_index, d.validity, -1, o.in_lcs, o.outcome
    FROM (SELECT * FROM {covered:needle_outcomes} UNION ALL BY NAME
          SELECT * FROM fresh_needle_rows) o
    JOIN displaced d ON d.run_id = o.run_id AND d.epoch = o.epoch AND d.cell_id = o.cell_id
)
SELECT cell_id, probe, model, needle_index, validity,
       sum(sign)::BIGINT AS needles,
       sum(CASE WHEN in_lcs THEN sign ELSE 0 END)::BIGINT AS in_lcs,
       sum(CASE WHEN outcome = 'correct' THEN sign ELSE 0 END)::BIGINT AS correct,
       sum(CASE WHEN outcome = 'missing' THEN sign ELSE 0 END)::BIGINT AS missing,
       sum(CASE WHEN outcome = 'misorder' THEN sign ELSE 0 END)::BIGINT AS misorder
FROM signed
GROUP BY ALL;

-- Per (cell, probe, model, needle index, validity) over the answers in `results`: needle rows
-- (`needles`: parsed answers expecting that needle) and how many were in the LCS, correct,
-- missing or misordered. What position_accuracy and the needle heatmaps read.
CREATE OR REPLACE VIEW needle_tallies AS
SELECT cell_id, probe, model, needle_index, validity,
       sum(needles)::BIGINT AS needles, sum(in_lcs)::BIGINT AS in_lcs,
       sum(correct)::BIGINT AS correct, sum(missing)::BIGINT AS missing,
       sum(misorder)::BIGINT AS misorder
FROM (SELECT * FROM {rollup:tallies} UNION ALL SELECT * FROM tally_delta)
GROUP BY ALL
HAVING sum(needles) <> 0;

-- Per (cell, probe, model, validity, graded, error kind, parse_ok, accuracy) over the answers
-- in `results`: how many (`answers`), and the sum and count of their latencies. What
-- accuracy_by_length and recall_stats read (figures.py): an accuracy value is a key, so the
-- median is exact.
CREATE OR REPLACE VIEW tally_answers AS
SELECT * FROM {rollup:answers};

CREATE OR REPLACE VIEW answer_delta AS
WITH changed AS MATERIALIZED (
    SELECT * FROM pick_changes
), signed AS (
    SELECT cell_id, new_probe AS probe, new_model AS model, new_validity AS validity,
           new_graded AS graded, new_error_kind AS error_kind, new_parse_ok AS parse_ok,
           new_accuracy AS accuracy, new_latency_s AS latency_s, 1 AS sign
    FROM changed
    UNION ALL
    SELECT cell_id, old_probe, old_model, old_validity, old_graded, old_error_kind,
           old_parse_ok, old_accuracy, old_latency_s, -1
    FROM changed WHERE old_run IS NOT NULL
)
SELECT cell_id, probe, model, validity, graded, error_kind, parse_ok, accuracy,
       sum(sign)::BIGINT AS answers,
       sum(CASE WHEN latency_s IS NOT NULL THEN sign ELSE 0 END)::BIGINT AS latencies,
       coalesce(sum(sign * latency_s), 0.0)::DOUBLE AS latency_sum
FROM signed
GROUP BY ALL;

CREATE OR REPLACE VIEW answer_tallies AS
SELECT cell_id, probe, model, validity, graded, error_kind, parse_ok, accuracy,
       sum(answers)::BIGINT AS answers, sum(latencies)::BIGINT AS latencies,
       sum(latency_sum)::DOUBLE AS latency_sum
FROM (SELECT * FROM tally_answers UNION ALL BY NAME SELECT * FROM answer_delta)
GROUP BY ALL
HAVING sum(answers) <> 0;

-- The (epoch, config) pairs `results` has a row for (recall_stats' `epochs`): the rollup's,
-- with the config's axes (or its cell id, when its cell was not written yet at the time), and
-- the (epoch, cell) pairs the fresh files add. figures.py joins the cell ids with `cells`.
CREATE OR REPLACE VIEW tally_epochs AS
SELECT * FROM {rollup:epochs};

CREATE OR REPLACE VIEW new_epochs AS
SELECT epoch, cell_id, new_probe AS probe, new_model AS model
FROM pick_changes WHERE old_run IS NULL;

-- The hallucination rows of the changed picks, signed (as tally_delta signs their needle rows),
-- per anchor interval: what they add to the covered hallucination tallies.
CREATE OR REPLACE VIEW invented_delta AS
WITH changed AS MATERIALIZED (
    SELECT * FROM pick_changes
), added AS MATERIALIZED (
    SELECT epoch, cell_id, new_run AS run_id, new_probe AS probe, new_model AS model,
           new_validity AS validity
    FROM changed WHERE new_graded
), displaced AS MATERIALIZED (
    SELECT epoch, cell_id, old_run AS run_id, old_probe AS probe, old_model AS model,
           old_validity AS validity
    FROM changed WHERE old_graded
), signed AS (
    SELECT o.cell_id, a.probe, a.model, a.validity, o.key_from, o.key_to, 1 AS sign
    FROM fresh_invented_rows o
    JOIN added a ON a.run_id = o.run_id AND a.epoch = o.epoch AND a.cell_id = o.cell_id
    UNION ALL
    SELECT o.cell_id, a.probe, a.model, a.validity, o.key_from, o.key_to, 1
    FROM {covered:hallucinations} o
    JOIN (SELECT * FROM added SEMI JOIN {rollup:pending} p
              ON added.run_id = p.run_id AND added.epoch = p.epoch
             AND added.cell_id = p.cell_id) a
      ON a.run_id = o.run_id AND a.epoch = o.epoch AND a.cell_id = o.cell_id
    UNION ALL
    SELECT o.cell_id, d.probe, d.model, d.validity, o.key_from, o.key_to, -1
    FROM (SELECT * FROM {covered:hallucinations} UNION ALL BY NAME
          SELECT * FROM fresh_invented_rows) o
    JOIN displaced d ON d.run_id = o.run_id AND d.epoch = o.epoch AND d.cell_id = o.cell_id
)
SELECT cell_id, probe, model, validity, key_from, key_to, sum(sign)::BIGINT AS hallucinations
FROM signed
GROUP BY ALL;

-- Per (cell, probe, model, validity, anchor interval) over the answers in `results`: their
-- hallucinated values between those needles. What the hallucination heatmaps read.
CREATE OR REPLACE VIEW hallucination_tallies AS
SELECT cell_id, probe, model, validity, key_from, key_to,
       sum(hallucinations)::BIGINT AS hallucinations
FROM (SELECT * FROM {rollup:invented} UNION ALL SELECT * FROM invented_delta)
GROUP BY ALL
HAVING sum(hallucinations) <> 0;
