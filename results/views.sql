-- Analysis views over the results tables. Schema version 2; version-1 files are read too.
--
-- Works in two places:
--   sweep sql "FROM depth_edge"              (the tool creates the tables' globs over --results first)
--   duckdb -init results/views.sql          (plain DuckDB shell, run from the repository root)
--
-- Each space is judged on its headline metric (`metric.name` in its YAML: top1, accuracy, val_loss, ...),
-- whose value is each trial's `score`, in the metric's own units and direction (`metric_mode`: max when
-- higher is better, min when lower is). The tolerance for "the trade holds", in those units, is a
-- setting. By default each space's own (`metric.tolerance` in its YAML, recorded in the `spaces` table
-- when it runs), else 0.5:
--   SET VARIABLE tolerance = 0.3;   -- one tolerance for every space; RESET VARIABLE tolerance to undo
--   sweep sql --tolerance 0.3 "FROM vs_baseline"   (the same through the tool; also `sweep report`)
-- or call the table macro directly: FROM vs_baseline_at(0.3).

-- @base-tables-begin (the `sweep` tool skips this block: it points these views at --results itself)
CREATE OR REPLACE VIEW trials_files AS FROM read_parquet('results/trials/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW epochs_files AS FROM read_parquet('results/epochs/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW kappa AS FROM read_parquet('results/kappa/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW spaces_files AS FROM read_parquet('results/spaces/**/*.parquet', union_by_name = true);
-- @base-tables-end

-- trials, epochs, spaces: the rows of every schema version, read as version 2. A version-1 trials row has
-- no metric, metric_mode or score (nor the sequence columns): its metric is top1, higher is better, and
-- its score is its top1. A version-1 epochs row's val_score is its val_top1. A version-1 spaces row has
-- tolerance_top1 (points of top-1) instead of metric, metric_mode and tolerance. The empty, typed selects
-- supply the columns that a folder holding only version-1 files lacks.
CREATE OR REPLACE VIEW trials AS
SELECT * REPLACE (
    coalesce(metric, 'top1') AS metric,
    coalesce(metric_mode, 'max') AS metric_mode,
    CASE WHEN metric IS NULL THEN top1 ELSE score END AS score)
FROM (
    FROM trials_files
    UNION ALL BY NAME
    SELECT NULL::VARCHAR AS metric, NULL::VARCHAR AS metric_mode, NULL::DOUBLE AS score, NULL::DOUBLE AS accuracy,
           NULL::DOUBLE AS train_tokens_per_s, NULL::DOUBLE AS infer_tokens_per_s, NULL::BIGINT AS seq_len
    WHERE false
);

CREATE OR REPLACE VIEW epochs AS
SELECT * REPLACE (CASE WHEN schema_version < 2 THEN val_top1 ELSE val_score END AS val_score)
FROM (
    FROM epochs_files
    UNION ALL BY NAME
    SELECT NULL::DOUBLE AS val_score, NULL::DOUBLE AS val_accuracy WHERE false
);

CREATE OR REPLACE VIEW spaces AS
SELECT * EXCLUDE (tolerance_top1) REPLACE (
    coalesce(metric, 'top1') AS metric,
    coalesce(metric_mode, 'max') AS metric_mode,
    coalesce(tolerance, tolerance_top1) AS tolerance)
FROM (
    FROM spaces_files
    UNION ALL BY NAME
    SELECT NULL::VARCHAR AS metric, NULL::VARCHAR AS metric_mode, NULL::DOUBLE AS tolerance,
           NULL::DOUBLE AS tolerance_top1
    WHERE false
);

-- Two-sided 95% Student t critical value for `dof` degrees of freedom. A fractional df (Welch) is
-- rounded down, which widens the interval: the conservative choice. Between tabulated values above 30
-- the next lower df's value is used; from 120 on, 1.980 (the normal limit is 1.960). A CASE/list, not a
-- lookup table, so it costs nothing per row.
CREATE OR REPLACE MACRO t95(dof) AS CASE
    WHEN dof IS NULL OR dof < 1 THEN NULL
    WHEN dof < 31 THEN [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                        2.060, 2.056, 2.052, 2.048, 2.045, 2.042][floor(dof)::INTEGER]
    WHEN dof < 40 THEN 2.042
    WHEN dof < 50 THEN 2.021
    WHEN dof < 60 THEN 2.009
    WHEN dof < 80 THEN 2.000
    WHEN dof < 100 THEN 1.990
    WHEN dof < 120 THEN 1.984
    ELSE 1.980
END;

-- space_settings: the latest recorded settings of each space: its headline metric and direction, the
-- latest tolerance recorded (NULL for a space known only from imports without one) and the metric that
-- tolerance was set for (a tolerance in points of top-1 must not judge a loss), and its question.
CREATE OR REPLACE VIEW space_settings AS
SELECT space,
       arg_max(metric, written_at) AS metric,
       arg_max(metric_mode, written_at) AS metric_mode,
       arg_max(tolerance, written_at) FILTER (WHERE tolerance IS NOT NULL) AS tolerance,
       arg_max(metric, written_at) FILTER (WHERE tolerance IS NOT NULL) AS tolerance_metric,
       arg_max(question, written_at) AS question
FROM spaces GROUP BY space;

-- configs: one row per (space, config, headline metric): the score (the metric's value, in its units)
-- over seeds that finished, with the costs beside it. top1_mean: top-1 too, where the trials have it.
CREATE OR REPLACE VIEW configs AS
SELECT
    space,
    config_id,
    metric,
    any_value(metric_mode) AS metric_mode,
    any_value(family) AS family,
    any_value(depth) AS depth,
    any_value(num_heads) AS num_heads,
    any_value(head_dim) AS head_dim,
    any_value(embed_dim) AS embed_dim,
    any_value(mlp_dim) AS mlp_dim,
    any_value(attn_dim) AS attn_dim,
    any_value(head_dim_rule) AS head_dim_rule,
    bool_or(is_baseline) AS is_baseline,
    count(DISTINCT seed) FILTER (WHERE status = 'ok') AS n_seeds,
    count(*) FILTER (WHERE status <> 'ok') AS n_failed,
    avg(score) FILTER (WHERE status = 'ok') AS score_mean,
    stddev_samp(score) FILTER (WHERE status = 'ok') AS score_sd,
    stddev_samp(score) FILTER (WHERE status = 'ok')
        / sqrt(count(score) FILTER (WHERE status = 'ok')) AS score_se,
    avg(top1) FILTER (WHERE status = 'ok') AS top1_mean,
    max(params) AS params,
    max(flops_per_sample) AS flops_per_sample,
    avg(train_samples_per_s) FILTER (WHERE status = 'ok') AS train_samples_per_s,
    avg(infer_samples_per_s) FILTER (WHERE status = 'ok') AS infer_samples_per_s,
    avg(latency_b1_ms) FILTER (WHERE status = 'ok') AS latency_b1_ms,
    avg(peak_mem_bytes) FILTER (WHERE status = 'ok') AS peak_mem_bytes,
    avg(kappa_mean) FILTER (WHERE status = 'ok') AS kappa_mean,
    max(kappa_max) FILTER (WHERE status = 'ok') AS kappa_max
FROM trials
GROUP BY space, config_id, metric;

-- vs_baseline_at(tolerance): every config against its space's baseline (of its own model family, when a
-- space runs several side by side), on the space's headline metric, in that metric's units and direction. The argument, a tolerance in those units, judges every space
-- (NULL: each space's own, 0.5 when it has none; the parameter is not called `tolerance`: DuckDB finds it
-- ambiguous beside the `tolerance` column of space_settings).
--   delta        = mean score of the config − mean score of the baseline (the metric's units)
--   delta_lo/hi  = 95% Welch interval of that difference (Student t, Welch–Satterthwaite df), when both
--                  sides have ≥ 2 seeds
--   verdict, metric_mode max (higher is better: top1, accuracy):
--                  'holds'  when delta_lo ≥ −tolerance   (confidently not worse by more than it)
--                  'breaks' when delta_hi < −tolerance   (confidently worse by more than it)
--            metric_mode min (lower is better: val_loss):
--                  'holds'  when delta_hi ≤ +tolerance   (confidently not worse by more than it)
--                  'breaks' when delta_lo > +tolerance   (confidently worse by more than it)
--                  'inconclusive' otherwise, or when a side has no finished seed
--   With one seed on either side there is no interval: the verdict falls back to the tolerance alone
--   (delta against ∓tolerance), `evidence` says 'single seed', and `significant` is false.
--   gain, gain_lo, gain_hi: the same difference signed so that positive is better (−delta for min), on
--   which the verdict is one rule: holds when gain_lo ≥ −tolerance, breaks when gain_hi < −tolerance.
CREATE OR REPLACE MACRO vs_baseline_at(fixed_tolerance) AS TABLE
WITH tolerances AS (
    SELECT DISTINCT c.space, c.metric,
           coalesce(fixed_tolerance, CASE WHEN s.tolerance_metric = c.metric THEN s.space_tolerance END, 0.5) AS tol
    FROM configs c
    LEFT JOIN (SELECT space, tolerance AS space_tolerance, tolerance_metric FROM space_settings) s USING (space)
),
base AS (
    SELECT space, metric, family, score_mean AS b_mean, score_sd AS b_sd, n_seeds AS b_n, params AS b_params,
           train_samples_per_s AS b_train, infer_samples_per_s AS b_infer, peak_mem_bytes AS b_mem,
           depth AS b_depth, head_dim AS b_head_dim
    FROM configs WHERE is_baseline
),
paired AS (
    SELECT c.*, b.* EXCLUDE (space, metric, family), t.tol,
           c.score_mean - b.b_mean AS delta,
           c.score_sd ^ 2 / c.n_seeds + b.b_sd ^ 2 / b.b_n AS var_delta,
           CASE WHEN c.metric_mode = 'min' THEN -1 ELSE 1 END AS better  -- +1: higher is better
    FROM configs c JOIN base b USING (space, metric, family) JOIN tolerances t USING (space, metric)
),
welch AS (
    SELECT *,
        CASE WHEN n_seeds >= 2 AND b_n >= 2 AND var_delta > 0 THEN
            var_delta ^ 2 / ((score_sd ^ 2 / n_seeds) ^ 2 / (n_seeds - 1) + (b_sd ^ 2 / b_n) ^ 2 / (b_n - 1))
        WHEN n_seeds >= 2 AND b_n >= 2 THEN n_seeds + b_n - 2
        END AS welch_df
    FROM paired
),
interval AS (
    SELECT *,
        delta - t95(welch_df) * sqrt(var_delta) AS delta_lo,
        delta + t95(welch_df) * sqrt(var_delta) AS delta_hi
    FROM welch
),
gains AS (
    SELECT *,
        better * delta AS gain,
        CASE WHEN better = 1 THEN delta_lo ELSE -delta_hi END AS gain_lo,
        CASE WHEN better = 1 THEN delta_hi ELSE -delta_lo END AS gain_hi
    FROM interval
)
SELECT
    space, config_id, family, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, head_dim_rule,
    is_baseline, n_seeds, b_n AS baseline_seeds, n_failed, metric, metric_mode, score_mean, score_sd,
    b_mean AS baseline_score, delta, delta_lo, delta_hi, welch_df, tol AS tolerance, gain, gain_lo, gain_hi,
    100.0 * (params - b_params) / b_params AS delta_params_pct,
    100.0 * (train_samples_per_s - b_train) / b_train AS delta_train_throughput_pct,
    100.0 * (infer_samples_per_s - b_infer) / b_infer AS delta_infer_throughput_pct,
    100.0 * (peak_mem_bytes - b_mem) / b_mem AS delta_mem_pct,
    params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes, kappa_mean,
    b_depth AS baseline_depth, b_head_dim AS baseline_head_dim,
    CASE
        WHEN n_seeds = 0 OR b_n = 0 THEN 'no finished seed'
        WHEN is_baseline THEN 'baseline'
        WHEN n_seeds = 1 OR b_n = 1 THEN 'single seed'
        ELSE 'welch t, 95%'
    END AS evidence,
    CASE
        WHEN n_seeds = 0 OR b_n = 0 THEN 'inconclusive'
        WHEN is_baseline THEN 'holds'  -- the reference, by definition
        WHEN n_seeds = 1 OR b_n = 1 THEN CASE WHEN gain >= -tol THEN 'holds' ELSE 'breaks' END
        WHEN gain_lo >= -tol THEN 'holds'
        WHEN gain_hi < -tol THEN 'breaks'
        ELSE 'inconclusive'
    END AS verdict,
    (NOT is_baseline AND n_seeds >= 2 AND b_n >= 2 AND (gain_lo >= -tol OR gain_hi < -tol)) AS significant
FROM gains;

CREATE OR REPLACE VIEW vs_baseline AS
FROM vs_baseline_at(getvariable('tolerance'));

-- depth_edge: along depth, for each (space, num_heads, head_dim) at the baseline's width and MLP (and per
-- model family and headline metric: a space of one family judged on one metric has one row per shape). Read from the verdicts, so it
-- works alike for metrics where higher is better and where lower is.
--   holds_down_to_depth: the shallowest depth (at or below the baseline's) whose verdict is holds, with
--                        every tried depth between it and the baseline's holding too
--   breaks_at_depth:     the deepest tried depth below that whose verdict is breaks (NULL if none)
CREATE OR REPLACE VIEW depth_edge AS
WITH ranked AS (
    SELECT *,
        -- non-holding depths from the baseline's depth down to this one: 0 means all of them hold
        sum(CASE WHEN verdict = 'holds' THEN 0 ELSE 1 END) OVER (
            PARTITION BY space, metric, family, num_heads, head_dim, embed_dim, mlp_dim ORDER BY depth DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE depth <= baseline_depth
)
SELECT space, metric, family, num_heads, head_dim, embed_dim, mlp_dim,
    min(depth) FILTER (WHERE misses_above = 0) AS holds_down_to_depth,
    -- rows with misses_above >= 1 are exactly the depths below holds_down_to_depth
    max(depth) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_depth,
    list(depth ORDER BY depth) AS depths_tried,
    list(verdict ORDER BY depth) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, family, embed_dim, mlp_dim, num_heads, head_dim;

-- head_dim_edge: along head_dim at fixed d_model (the fixed_d_model arm), for each (space, depth) (and per
-- model family and headline metric).
--   holds_down_to_head_dim: the smallest head_dim (at or below the baseline's) that holds, with every
--                           tried head_dim between it and the baseline's holding too
--   breaks_at_head_dim:     the largest tried head_dim below that whose verdict is breaks (NULL if none)
CREATE OR REPLACE VIEW head_dim_edge AS
WITH ranked AS (
    SELECT *,
        sum(CASE WHEN verdict = 'holds' THEN 0 ELSE 1 END) OVER (
            PARTITION BY space, metric, family, depth, embed_dim, mlp_dim ORDER BY head_dim DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE attn_dim = embed_dim AND head_dim <= baseline_head_dim
)
SELECT space, metric, family, depth, embed_dim, mlp_dim,
    min(head_dim) FILTER (WHERE misses_above = 0) AS holds_down_to_head_dim,
    max(head_dim) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_head_dim,
    list(head_dim ORDER BY head_dim) AS head_dims_tried,
    list(verdict ORDER BY head_dim) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, family, embed_dim, mlp_dim, depth;

-- pareto: configs no other config of the same space beats on both the headline score (better by the
-- metric's direction: higher top-1, lower validation loss) and params (lower). `goodness` is the score
-- signed so that higher is better. One sort instead of a pairwise comparison: a config is on the front
-- when its goodness beats every config with strictly fewer parameters and is the best among configs with
-- exactly as many.
CREATE OR REPLACE VIEW pareto AS
WITH finished AS (
    SELECT *, CASE WHEN metric_mode = 'min' THEN -score_mean ELSE score_mean END AS goodness
    FROM configs
    WHERE n_seeds > 0
),
ranked AS (
    SELECT *,
        max(goodness) OVER (PARTITION BY space, metric ORDER BY params
                            RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS best_with_fewer_params,
        max(goodness) OVER (PARTITION BY space, metric, params) AS best_with_same_params
    FROM finished
)
SELECT space, config_id, metric, metric_mode, family, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, n_seeds,
       score_mean, score_se, params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes,
       kappa_mean, is_baseline
FROM ranked
WHERE (best_with_fewer_params IS NULL OR goodness > best_with_fewer_params)
  AND goodness = best_with_same_params
ORDER BY space, params;

-- kappa_vs_heads: κ at each trial's last probed epoch, per layer and averaged over layers, by family, heads and
-- head_dim (and attention width, which separates the two arms of the width control), with the headline
-- score (score_mean, in the metric's units).
-- Rows with layer NULL are averages: over the layers of one attention kind (attention set: TNT's inner
-- and outer, DaViT's window and channel, VOLO's outlook and self) and over every layer (attention NULL).
CREATE OR REPLACE VIEW kappa_vs_heads AS
WITH last_probe AS (
    SELECT k.*, max(k.epoch) OVER (PARTITION BY k.trial_id) AS last_epoch FROM kappa k
),
final_kappa AS (
    SELECT t.space, t.config_id, t.family, t.depth, t.num_heads, t.head_dim, t.embed_dim, t.attn_dim,
           t.head_dim_rule, t.seed, t.metric, t.score, l.attention, l.layer, l.kappa, l.kappa_max
    FROM last_probe l JOIN trials t USING (trial_id)
    WHERE l.epoch = l.last_epoch AND t.status = 'ok'
)
SELECT space, family, depth, num_heads, head_dim, embed_dim, attn_dim,
       any_value(head_dim_rule) AS head_dim_rule,
       attention, layer, count(DISTINCT seed) AS n_seeds,
       median(kappa) AS kappa_median, avg(kappa) AS kappa_mean, max(kappa_max) AS kappa_max,
       metric, avg(score) AS score_mean
FROM final_kappa
GROUP BY GROUPING SETS ((space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim, attention, layer),
                        (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim, attention),
                        (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim))
ORDER BY space, family, depth, num_heads, head_dim, attn_dim, attention NULLS LAST, layer NULLS LAST;

-- infeasible: per space, the share of trials that did not finish, by cause.
CREATE OR REPLACE VIEW infeasible AS
SELECT space,
       count(*) AS trials,
       avg(CASE WHEN status = 'diverged' THEN 1.0 ELSE 0.0 END) AS diverged_fraction,
       avg(CASE WHEN status = 'oom' THEN 1.0 ELSE 0.0 END) AS oom_fraction,
       avg(CASE WHEN status = 'error' THEN 1.0 ELSE 0.0 END) AS error_fraction,
       avg(CASE WHEN status = 'pruned' THEN 1.0 ELSE 0.0 END) AS pruned_fraction,
       avg(CASE WHEN status <> 'ok' THEN 1.0 ELSE 0.0 END) AS infeasible_fraction
FROM trials
GROUP BY space
ORDER BY space;
