-- Analysis views over the results tables. Schema version 1.
--
-- Works in two places:
--   sweep sql "FROM depth_edge"              (the tool creates trials/epochs/kappa over --results first)
--   duckdb -init results/views.sql          (plain DuckDB shell, run from the repository root)
--
-- The tolerance for "the trade holds", in top-1 points, is a setting. By default each space's own
-- (`analysis.tolerance_top1` in its YAML, recorded in the `spaces` table when it runs), else 0.5:
--   SET VARIABLE tolerance = 0.3;   -- one tolerance for every space; RESET VARIABLE tolerance to undo
-- or call the table macro directly: FROM vs_baseline_at(0.3).

-- @base-tables-begin (the `sweep` tool skips this block: it points these views at --results itself)
CREATE OR REPLACE VIEW trials AS FROM read_parquet('results/trials/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW epochs AS FROM read_parquet('results/epochs/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW kappa AS FROM read_parquet('results/kappa/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW spaces AS FROM read_parquet('results/spaces/**/*.parquet', union_by_name = true);
-- @base-tables-end

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

-- space_settings: the latest recorded settings of each space (a space known only from imports has none).
CREATE OR REPLACE VIEW space_settings AS
SELECT space, arg_max(tolerance_top1, written_at) AS tolerance_top1, arg_max(question, written_at) AS question
FROM spaces GROUP BY space;

-- configs: one row per (space, config): top-1 over seeds that finished, with the costs beside it.
CREATE OR REPLACE VIEW configs AS
SELECT
    space,
    config_id,
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
    avg(top1) FILTER (WHERE status = 'ok') AS top1_mean,
    stddev_samp(top1) FILTER (WHERE status = 'ok') AS top1_sd,
    stddev_samp(top1) FILTER (WHERE status = 'ok')
        / sqrt(count(top1) FILTER (WHERE status = 'ok')) AS top1_se,
    max(params) AS params,
    max(flops_per_sample) AS flops_per_sample,
    avg(train_samples_per_s) FILTER (WHERE status = 'ok') AS train_samples_per_s,
    avg(infer_samples_per_s) FILTER (WHERE status = 'ok') AS infer_samples_per_s,
    avg(latency_b1_ms) FILTER (WHERE status = 'ok') AS latency_b1_ms,
    avg(peak_mem_bytes) FILTER (WHERE status = 'ok') AS peak_mem_bytes,
    avg(kappa_mean) FILTER (WHERE status = 'ok') AS kappa_mean,
    max(kappa_max) FILTER (WHERE status = 'ok') AS kappa_max
FROM trials
GROUP BY space, config_id;

-- vs_baseline_at(tolerance): every config against its space's baseline. tolerance NULL: each space's own.
--   delta_top1   = mean top-1 of the config − mean top-1 of the baseline (points)
--   delta_lo/hi  = 95% Welch interval of that difference (Student t, Welch–Satterthwaite df), when both
--                  sides have ≥ 2 seeds
--   verdict      = 'holds'  when delta_lo ≥ −tolerance   (confidently not worse by more than it)
--                  'breaks' when delta_hi < −tolerance   (confidently worse by more than it)
--                  'inconclusive' otherwise, or when a side has no finished seed
--   With one seed on either side there is no interval: the verdict falls back to the tolerance alone
--   (delta_top1 against −tolerance), `evidence` says 'single seed', and `significant` is false.
CREATE OR REPLACE MACRO vs_baseline_at(tolerance) AS TABLE
WITH tolerances AS (
    SELECT DISTINCT c.space, coalesce(tolerance, s.tolerance_top1, 0.5) AS tol
    FROM configs c LEFT JOIN space_settings s USING (space)
),
base AS (
    SELECT space, top1_mean AS b_mean, top1_sd AS b_sd, n_seeds AS b_n, params AS b_params,
           train_samples_per_s AS b_train, infer_samples_per_s AS b_infer, peak_mem_bytes AS b_mem,
           depth AS b_depth, head_dim AS b_head_dim
    FROM configs WHERE is_baseline
),
paired AS (
    SELECT c.*, b.* EXCLUDE (space), t.tol,
           c.top1_mean - b.b_mean AS delta_top1,
           c.top1_sd ^ 2 / c.n_seeds + b.b_sd ^ 2 / b.b_n AS var_delta
    FROM configs c JOIN base b USING (space) JOIN tolerances t USING (space)
),
interval AS (
    SELECT *,
        CASE WHEN n_seeds >= 2 AND b_n >= 2 AND var_delta > 0 THEN
            var_delta ^ 2 / ((top1_sd ^ 2 / n_seeds) ^ 2 / (n_seeds - 1) + (b_sd ^ 2 / b_n) ^ 2 / (b_n - 1))
        WHEN n_seeds >= 2 AND b_n >= 2 THEN n_seeds + b_n - 2
        END AS welch_df
    FROM paired
)
SELECT
    space, config_id, family, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, head_dim_rule,
    is_baseline, n_seeds, b_n AS baseline_seeds, n_failed, top1_mean, top1_sd, b_mean AS baseline_top1,
    delta_top1,
    delta_top1 - t95(welch_df) * sqrt(var_delta) AS delta_lo,
    delta_top1 + t95(welch_df) * sqrt(var_delta) AS delta_hi,
    welch_df,
    tol AS tolerance,
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
        WHEN n_seeds = 1 OR b_n = 1 THEN CASE WHEN delta_top1 >= -tol THEN 'holds' ELSE 'breaks' END
        WHEN delta_top1 - t95(welch_df) * sqrt(var_delta) >= -tol THEN 'holds'
        WHEN delta_top1 + t95(welch_df) * sqrt(var_delta) < -tol THEN 'breaks'
        ELSE 'inconclusive'
    END AS verdict,
    (NOT is_baseline AND n_seeds >= 2 AND b_n >= 2 AND (
        delta_top1 - t95(welch_df) * sqrt(var_delta) >= -tol
        OR delta_top1 + t95(welch_df) * sqrt(var_delta) < -tol)) AS significant
FROM interval;

CREATE OR REPLACE VIEW vs_baseline AS
FROM vs_baseline_at(getvariable('tolerance'));

-- depth_edge: along depth, for each (space, num_heads, head_dim) at the baseline's width and MLP.
--   holds_down_to_depth: the shallowest depth (at or below the baseline's) whose verdict is holds, with
--                        every tried depth between it and the baseline's holding too
--   breaks_at_depth:     the deepest tried depth below that whose verdict is breaks (NULL if none)
CREATE OR REPLACE VIEW depth_edge AS
WITH ranked AS (
    SELECT *,
        -- non-holding depths from the baseline's depth down to this one: 0 means all of them hold
        sum(CASE WHEN verdict = 'holds' THEN 0 ELSE 1 END) OVER (
            PARTITION BY space, num_heads, head_dim, embed_dim, mlp_dim ORDER BY depth DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE depth <= baseline_depth
)
SELECT space, num_heads, head_dim, embed_dim, mlp_dim,
    min(depth) FILTER (WHERE misses_above = 0) AS holds_down_to_depth,
    -- rows with misses_above >= 1 are exactly the depths below holds_down_to_depth
    max(depth) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_depth,
    list(depth ORDER BY depth) AS depths_tried,
    list(verdict ORDER BY depth) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, embed_dim, mlp_dim, num_heads, head_dim;

-- head_dim_edge: along head_dim at fixed d_model (the fixed_d_model arm), for each (space, depth).
--   holds_down_to_head_dim: the smallest head_dim (at or below the baseline's) that holds, with every
--                           tried head_dim between it and the baseline's holding too
--   breaks_at_head_dim:     the largest tried head_dim below that whose verdict is breaks (NULL if none)
CREATE OR REPLACE VIEW head_dim_edge AS
WITH ranked AS (
    SELECT *,
        sum(CASE WHEN verdict = 'holds' THEN 0 ELSE 1 END) OVER (
            PARTITION BY space, depth, embed_dim, mlp_dim ORDER BY head_dim DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE attn_dim = embed_dim AND head_dim <= baseline_head_dim
)
SELECT space, depth, embed_dim, mlp_dim,
    min(head_dim) FILTER (WHERE misses_above = 0) AS holds_down_to_head_dim,
    max(head_dim) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_head_dim,
    list(head_dim ORDER BY head_dim) AS head_dims_tried,
    list(verdict ORDER BY head_dim) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, embed_dim, mlp_dim, depth;

-- pareto: configs no other config of the same space beats on both top-1 (higher) and params (lower).
-- One sort instead of a pairwise comparison: a config is on the front when its top-1 beats every config
-- with strictly fewer parameters and is the best among configs with exactly as many.
CREATE OR REPLACE VIEW pareto AS
WITH finished AS (
    SELECT *,
        max(top1_mean) OVER (PARTITION BY space ORDER BY params
                             RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS best_with_fewer_params,
        max(top1_mean) OVER (PARTITION BY space, params) AS best_with_same_params
    FROM configs
    WHERE n_seeds > 0
)
SELECT space, config_id, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, n_seeds, top1_mean, top1_se,
       params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes, kappa_mean, is_baseline
FROM finished
WHERE (best_with_fewer_params IS NULL OR top1_mean > best_with_fewer_params)
  AND top1_mean = best_with_same_params
ORDER BY space, params;

-- kappa_vs_heads: κ at each trial's last probed epoch, per layer and averaged over layers, by heads and
-- head_dim (and attention width, which separates the two arms of the width control), with top-1.
-- Rows with layer NULL are averages: over the layers of one attention kind (attention set: TNT's inner
-- and outer, DaViT's window and channel, VOLO's outlook and self) and over every layer (attention NULL).
CREATE OR REPLACE VIEW kappa_vs_heads AS
WITH last_probe AS (
    SELECT k.*, max(k.epoch) OVER (PARTITION BY k.trial_id) AS last_epoch FROM kappa k
),
final_kappa AS (
    SELECT t.space, t.config_id, t.depth, t.num_heads, t.head_dim, t.embed_dim, t.attn_dim, t.head_dim_rule,
           t.seed, t.top1, l.attention, l.layer, l.kappa, l.kappa_max
    FROM last_probe l JOIN trials t USING (trial_id)
    WHERE l.epoch = l.last_epoch AND t.status = 'ok'
)
SELECT space, depth, num_heads, head_dim, embed_dim, attn_dim,
       any_value(head_dim_rule) AS head_dim_rule,
       attention, layer, count(DISTINCT seed) AS n_seeds,
       median(kappa) AS kappa_median, avg(kappa) AS kappa_mean, max(kappa_max) AS kappa_max,
       avg(top1) AS top1_mean
FROM final_kappa
GROUP BY GROUPING SETS ((space, depth, num_heads, head_dim, embed_dim, attn_dim, attention, layer),
                        (space, depth, num_heads, head_dim, embed_dim, attn_dim, attention),
                        (space, depth, num_heads, head_dim, embed_dim, attn_dim))
ORDER BY space, depth, num_heads, head_dim, attn_dim, attention NULLS LAST, layer NULLS LAST;

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
