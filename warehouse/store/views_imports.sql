-- Results imported from other needle tools (`needlescope import`), over the shared views.
-- The tool is in cells.probe_params ($.tool), RULER's task in $.task; the tool's own score
-- (unscaled) in answers.original_score, needlescope's grade in accuracy.

-- One row per tool × model × probe × task × length × depth: needlescope's figure and the
-- tool's own, side by side (score-only rows have no accuracy: `graded` counts the others).
CREATE OR REPLACE VIEW imported_cells AS
SELECT json_extract_string(c.probe_params, '$.tool') AS tool,
       r.epoch, r.model, r.probe,
       json_extract_string(c.probe_params, '$.task') AS task,
       r.length, r.length_unit, r.depth,
       count(*) AS answers,
       count(r.accuracy) AS graded,
       avg(r.accuracy) AS mean_accuracy,
       count(r.original_score) AS scored,
       avg(r.original_score) AS mean_original_score
FROM results r JOIN cells c USING (cell_id)
-- every import is in an epoch of its own (tool_import.tool_epoch): a filter on the epoch
-- reaches the files below results' window, where the tool's name (a cells column) cannot
WHERE starts_with(r.epoch, 'legacy-')
  AND json_extract_string(c.probe_params, '$.tool') IS NOT NULL
  AND r.error_kind IS NULL
GROUP BY ALL;
