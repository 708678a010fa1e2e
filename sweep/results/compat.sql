-- Analysis views over the results tables. Schema version 2; version-1 files are read too.
--
-- Works in two places:
--   sweep sql "FROM depth_edge"              (the tool creates the tables' globs over --results first)
--   sweep sql --print-views > views.sql; duckdb -init views.sql
--                                            (plain DuckDB shell, run from the folder that holds results/)
--
-- The definitions are files loaded in this order (sweep/analysis/sql.py): sweep/results/compat.sql (the
-- tables, every schema version read as the latest), macros.sql (statistics), the core views (core.sql,
-- verdicts.sql, costs.sql, kappa.sql), then each question's file beside its module (sweep/questions/*.sql, in
-- the registry's order).
--
-- Each space is judged on its headline metric (`metric.name` in its YAML: top1, accuracy, val_loss, ...),
-- whose value is each trial's `score`, in the metric's own units and direction (`metric_mode`: max when
-- higher is better, min when lower is). The tolerance for "the trade holds", in those units, is a
-- setting. By default each space's own (`metric.tolerance` in its YAML, recorded in the `spaces` table
-- when it runs), else 0.5:
--   SET VARIABLE tolerance = 0.3;   -- one tolerance for every space; RESET VARIABLE tolerance to undo
--   sweep sql --tolerance 0.3 "FROM vs_baseline"   (the same through the tool; also `sweep report`)
-- or call the table macro directly: FROM vs_baseline_at(0.3).
-- The same tolerance judges matched_budget (FROM matched_budget_at(0.3)).
--

-- @base-tables-begin (the `sweep` tool skips this block: it points these views at --results itself)
-- A compacted file's rows replace those of the files its `sweep.replaces` metadata names, which are kept for a
-- retention period after it is written (docs/schema.md#compaction-one-file-per-sweep-and-table): each table
-- leaves those files out, but only when it read the compacted file itself. DuckDB lists the files twice (the
-- rows', then the metadata's), and a compaction may write between the two: its originals are then read, and
-- its compacted file is not, so the count stays right.
CREATE OR REPLACE MACRO current_files(pattern) AS TABLE
  WITH files AS MATERIALIZED (FROM read_parquet(pattern, union_by_name = true, filename = true))
  FROM files SELECT * EXCLUDE (filename)
  WHERE filename NOT IN (SELECT parse_dirpath(file_name) || '/' || unnest(from_json(decode(value), '["VARCHAR"]'))
                         FROM parquet_kv_metadata(pattern)
                         WHERE decode(key) = 'sweep.replaces' AND file_name IN (SELECT filename FROM files));
CREATE OR REPLACE VIEW trials_files AS FROM current_files('results/trials/**/*.parquet');
CREATE OR REPLACE VIEW epochs_files AS FROM current_files('results/epochs/**/*.parquet');
CREATE OR REPLACE VIEW kappa AS FROM current_files('results/kappa/**/*.parquet');
CREATE OR REPLACE VIEW spaces_files AS FROM current_files('results/spaces/**/*.parquet');
-- @base-tables-end

-- trials, epochs, spaces: the rows of every schema version, read as version 2. A version-1 trials row has
-- no metric, metric_mode or score (nor the sequence columns): its metric is top1, higher is better, and
-- its score is its top1. A row from before a question's axis (listed in the replace below, each with its
-- definition: Question.axes in sweep/questions/) reads it as the model as built (Axis.default_sql: as many
-- key/value heads as heads, conditioning 'none'); one from
-- before a question's label column (listed at the select below, each with its definition: Question.labels in
-- sweep/questions/) has it NULL, as every config the question does not label; one from before chance levels were
-- recorded has chance_score NULL (nothing is flagged as at chance), and one from before device-seconds were recorded
-- has devices_held and device_s NULL (its cost unknown: it counts 0 towards --max-gpu-hours). A version-1 epochs row's
-- val_score is its val_top1. A version-1 spaces row has tolerance_top1 (points of top-1) instead of metric,
-- metric_mode and tolerance; one from before the questions recorded anything has questions NULL, and one from
-- before the search was recorded has search NULL (read as not an edge search). The empty, typed selects
-- supply the columns that a folder holding only version-1 files lacks.
CREATE OR REPLACE VIEW trials AS
SELECT * REPLACE (
    -- @question-axes (sweep/results/reader.py compat_sql reads each declared axis as the model as built here)
    coalesce(metric, 'top1') AS metric,
    coalesce(metric_mode, 'max') AS metric_mode,
    CASE WHEN metric IS NULL THEN top1 ELSE score END AS score)
FROM (
    FROM trials_files
    UNION ALL BY NAME
    SELECT -- @question-labels (sweep/results/reader.py compat_sql puts each declared label's typed NULL here)
           NULL::VARCHAR AS metric, NULL::VARCHAR AS metric_mode, NULL::DOUBLE AS score, NULL::DOUBLE AS accuracy,
           NULL::DOUBLE AS train_tokens_per_s, NULL::DOUBLE AS infer_tokens_per_s, NULL::BIGINT AS seq_len,
           -- @question-axis-nulls (and each declared axis's typed NULL here)
           NULL::BIGINT AS kv_cache_bytes_per_token,
           NULL::DOUBLE AS token_latency_ms, NULL::DOUBLE AS chance_score, NULL::DOUBLE AS devices_held,
           NULL::DOUBLE AS device_s
    WHERE false
);

-- Only a recorded trial's epochs: the sink writes a trial's epochs before its trials row (the row is the commit
-- marker), so a driver killed between the two leaves epochs of a trial that is not recorded, and run again.
CREATE OR REPLACE VIEW epochs AS
SELECT * REPLACE (CASE WHEN schema_version < 2 THEN val_top1 ELSE val_score END AS val_score)
FROM (
    FROM epochs_files
    UNION ALL BY NAME
    SELECT NULL::DOUBLE AS val_score, NULL::DOUBLE AS val_accuracy WHERE false
)
WHERE trial_id IN (SELECT trial_id FROM trials_files);

CREATE OR REPLACE VIEW spaces AS
SELECT * EXCLUDE (tolerance_top1) REPLACE (
    coalesce(metric, 'top1') AS metric,
    coalesce(metric_mode, 'max') AS metric_mode,
    coalesce(tolerance, tolerance_top1) AS tolerance)
FROM (
    FROM spaces_files
    UNION ALL BY NAME
    SELECT -- @question-labels (sweep/results/reader.py compat_sql puts each declared label's typed NULL here)
           NULL::VARCHAR AS metric, NULL::VARCHAR AS metric_mode, NULL::DOUBLE AS tolerance,
           NULL::DOUBLE AS tolerance_top1, NULL::VARCHAR AS questions, NULL::VARCHAR AS search
    WHERE false
);
