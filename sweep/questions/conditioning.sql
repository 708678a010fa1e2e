-- The conditioning question's views (sweep/questions/conditioning.py).

-- conditioning_effect: each conditioning intervention (workers/conditioning.py) against 'none' at the same
-- shape: same (space, metric, family, depth, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads). One row
-- per intervention and shape where both sides have a config. Did the intervention move κ, and the score?
--   delta         = mean score with the intervention − mean score without (the metric's units, NOT
--                   direction-aware, as vs_baseline.delta); delta_lo/hi its 95% Welch interval:
--                   delta ∓ t95(welch_df) · √(s_c²/n_c + s_0²/n_0) (both sides ≥ 2 seeds, else NULL)
--   gain, gain_lo, gain_hi: the same signed so that positive is better (−delta for a min metric)
--   evidence      'no finished seed' | 'single seed' (a side has one seed: no interval, never significant)
--                 | 'welch t, 95%'
--   delta_log_kappa = log_kappa_mean with − without (configs.log_kappa_mean: the mean over finished seeds
--                   of ln kappa_mean, the model-level κ of the last probe); delta_log_kappa_lo/hi its 95%
--                   Welch interval on the per-seed ln κ (log_kappa_sd, n_kappa; both sides ≥ 2)
--   kappa_ratio   = exp(delta_log_kappa), the ratio of geometric-mean κ (with / without); kappa_ratio_lo/hi
--                   = exp of the interval's ends
--   kappa_moved   TRUE when the ln κ interval excludes 0 (κ moved, either way), FALSE when it contains 0,
--                 NULL when a side has fewer than 2 seeds with κ (kappa_evidence 'single seed')
CREATE OR REPLACE VIEW conditioning_effect AS
WITH sides AS (
    SELECT c.space, c.metric, c.metric_mode, c.family, c.depth, c.num_heads, c.head_dim, c.embed_dim,
           c.mlp_dim/*@axes c.*/, c.config_id, c.n_seeds, c.score_mean, c.score_sd, c.kappa_mean,
           c.log_kappa_mean, c.log_kappa_sd, c.n_kappa,
           z.config_id AS none_config_id, z.n_seeds AS none_seeds, z.score_mean AS none_score, z.score_sd AS none_sd,
           z.kappa_mean AS none_kappa_mean, z.log_kappa_mean AS none_log_kappa, z.log_kappa_sd AS none_log_kappa_sd,
           z.n_kappa AS none_n_kappa,
           better_sign(c.metric_mode) AS better
    FROM configs c JOIN configs z
      ON z.space = c.space AND z.metric = c.metric AND z.family IS NOT DISTINCT FROM c.family AND z.depth = c.depth
     AND z.num_heads = c.num_heads AND z.head_dim = c.head_dim AND z.embed_dim = c.embed_dim
     AND z.mlp_dim = c.mlp_dim/*@axes-same z c but conditioning*/ AND z.conditioning = 'none'
    WHERE c.conditioning <> 'none'
),
intervals AS (
    SELECT *,
        score_mean - none_score AS delta,
        welch_df(score_sd, n_seeds, none_sd, none_seeds) AS welch_df,
        sqrt(score_sd ^ 2 / n_seeds + none_sd ^ 2 / none_seeds) AS delta_se,
        log_kappa_mean - none_log_kappa AS delta_log_kappa,
        welch_df(log_kappa_sd, n_kappa, none_log_kappa_sd, none_n_kappa) AS kappa_welch_df,
        sqrt(log_kappa_sd ^ 2 / n_kappa + none_log_kappa_sd ^ 2 / none_n_kappa) AS log_kappa_se
    FROM sides
),
bounds AS (
    SELECT *,
        delta - t95(welch_df) * delta_se AS delta_lo, delta + t95(welch_df) * delta_se AS delta_hi,
        delta_log_kappa - t95(kappa_welch_df) * log_kappa_se AS delta_log_kappa_lo,
        delta_log_kappa + t95(kappa_welch_df) * log_kappa_se AS delta_log_kappa_hi
    FROM intervals
)
SELECT space, metric, metric_mode, family, depth, num_heads, head_dim, embed_dim, mlp_dim/*@axes*/,
       config_id, none_config_id, n_seeds, none_seeds, score_mean, none_score,
       delta, delta_lo, delta_hi, welch_df,
       better * delta AS gain,
       signed_lo(better, delta_lo, delta_hi) AS gain_lo,
       signed_hi(better, delta_lo, delta_hi) AS gain_hi,
       CASE WHEN n_seeds = 0 OR none_seeds = 0 THEN 'no finished seed'
            WHEN n_seeds = 1 OR none_seeds = 1 THEN 'single seed'
            ELSE 'welch t, 95%' END AS evidence,
       kappa_mean, none_kappa_mean, n_kappa, none_n_kappa,
       delta_log_kappa, delta_log_kappa_lo, delta_log_kappa_hi,
       exp(delta_log_kappa) AS kappa_ratio, exp(delta_log_kappa_lo) AS kappa_ratio_lo,
       exp(delta_log_kappa_hi) AS kappa_ratio_hi,
       CASE WHEN delta_log_kappa_lo IS NULL THEN NULL
            ELSE delta_log_kappa_lo > 0 OR delta_log_kappa_hi < 0 END AS kappa_moved,
       CASE WHEN n_kappa = 0 OR none_n_kappa = 0 THEN 'no κ'
            WHEN n_kappa = 1 OR none_n_kappa = 1 THEN 'single seed'
            ELSE 'welch t, 95%' END AS kappa_evidence
FROM bounds
ORDER BY space, metric, family, embed_dim, mlp_dim, depth, num_heads/*@axes*/;

-- conditioning_vs_heads: does a shallower model with a conditioning intervention close the gap that extra
-- heads close? Per (space, metric, family), for each depth d below the baseline's (baseline: configs'
-- is_baseline, which names its conditioning, normally 'none'), at the baseline's num_heads, head_dim,
-- embed_dim, mlp_dim and num_kv_heads; one row per intervention tried at that shallow shape. All three
-- figures are signed so that positive is better (the metric's direction), in the metric's units; s(·) is a
-- config's mean score over finished seeds:
--   gap                   = s(baseline) − s(d, baseline heads, none): what the missing depth costs
--   heads_recovery        = s(d, best more heads, none) − s(d, baseline heads, none), where "best more heads"
--                           is the config at depth d with num_heads > the baseline's (same embed_dim,
--                           mlp_dim, conditioning 'none'; head_dim as the space's rule gives it) with the
--                           best mean score (heads_num_heads, heads_head_dim say which). Picking the best
--                           of several favours heads a little (the winner's curse): read it as an upper
--                           reading of what heads buy.
--   conditioning_recovery = s(d, baseline heads, intervention) − s(d, baseline heads, none)
--   vs_baseline           = s(d, baseline heads, intervention) − s(baseline): the gap left (gain sign)
--   cond_minus_heads      = conditioning_recovery − heads_recovery = s(intervention) − s(best more heads)
--   each *_lo/hi: its 95% Welch interval (t95(welch_df) · √(s_a²/n_a + s_b²/n_b) over the two configs it
--   compares; NULL when either has fewer than 2 seeds; evidence then 'single seed')
--   tolerance: as vs_baseline's (SET VARIABLE tolerance, else the space's own, else 0.5)
--   verdict, on the intervals (on the point values with 'single seed', and said so):
--     'closes the gap'                      vs_baseline_lo ≥ −tolerance: the shallow model with the
--                                           intervention is confidently within tolerance of the baseline
--     'narrows the gap, does not close it'  vs_baseline_hi < −tolerance and conditioning_recovery_lo > 0
--     'no recovery: the gap stays'          vs_baseline_hi < −tolerance and the recovery interval holds 0
--     'widens the gap'                      vs_baseline_hi < −tolerance and conditioning_recovery_hi < 0
--     'open'                                otherwise (the intervals allow both)
--   heads_verdict: the same rule for the best more-heads config (vs_baseline of heads; heads_recovery)
--   as_much_as_heads: TRUE when cond_minus_heads_lo ≥ −tolerance (confidently not worse than the heads by
--                     more than the tolerance), FALSE when cond_minus_heads_hi < −tolerance, NULL otherwise
--   kappa_ratio, heads_kappa_ratio: geometric-mean κ with the intervention, and with the best more-heads
--                     config, over the shallow baseline-heads 'none' config's (exp of the ln κ difference)
CREATE OR REPLACE VIEW conditioning_vs_heads AS
WITH base AS (
    SELECT space, metric, family, depth AS b_depth, num_heads AS b_heads, head_dim AS b_head_dim,
           embed_dim, mlp_dim, num_kv_heads AS b_kv, score_mean AS b_mean, score_sd AS b_sd, n_seeds AS b_n,
           better_sign(metric_mode) AS better
    FROM configs WHERE is_baseline AND n_seeds > 0
),
shallow AS (  -- depth d below the baseline's, baseline heads, no intervention
    SELECT b.*, c.depth, c.score_mean AS s0_mean, c.score_sd AS s0_sd, c.n_seeds AS s0_n,
           c.log_kappa_mean AS s0_log_kappa
    FROM base b JOIN configs c
      ON c.space = b.space AND c.metric = b.metric AND c.family IS NOT DISTINCT FROM b.family
     AND c.depth < b.b_depth AND c.num_heads = b.b_heads AND c.head_dim = b.b_head_dim
     AND c.embed_dim = b.embed_dim AND c.mlp_dim = b.mlp_dim AND c.num_kv_heads = b.b_kv
     AND c.conditioning = 'none' AND c.n_seeds > 0
),
heads AS (  -- the best config with more heads at that depth, no intervention
    SELECT s.space, s.metric, s.family, s.depth, c.num_heads AS h_heads, c.head_dim AS h_head_dim,
           c.score_mean AS h_mean, c.score_sd AS h_sd, c.n_seeds AS h_n, c.log_kappa_mean AS h_log_kappa
    FROM shallow s JOIN configs c
      ON c.space = s.space AND c.metric = s.metric AND c.family IS NOT DISTINCT FROM s.family
     AND c.depth = s.depth AND c.num_heads > s.b_heads AND c.embed_dim = s.embed_dim AND c.mlp_dim = s.mlp_dim
     AND c.conditioning = 'none' AND c.n_seeds > 0
    QUALIFY row_number() OVER (PARTITION BY s.space, s.metric, s.family, s.depth
                               ORDER BY s.better * c.score_mean DESC, c.num_heads) = 1
),
treated AS (  -- the same shallow shape with each intervention
    SELECT s.*, c.conditioning, c.score_mean AS c_mean, c.score_sd AS c_sd, c.n_seeds AS c_n,
           c.log_kappa_mean AS c_log_kappa
    FROM shallow s JOIN configs c
      ON c.space = s.space AND c.metric = s.metric AND c.family IS NOT DISTINCT FROM s.family
     AND c.depth = s.depth AND c.num_heads = s.b_heads AND c.head_dim = s.b_head_dim
     AND c.embed_dim = s.embed_dim AND c.mlp_dim = s.mlp_dim AND c.num_kv_heads = s.b_kv
     AND c.conditioning <> 'none' AND c.n_seeds > 0
),
paired AS (
    SELECT t.*, h.h_heads, h.h_head_dim, h.h_mean, h.h_sd, h.h_n, h.h_log_kappa, tol.tol,
        -- (point value, Welch half-width) of each comparison, signed so that positive is better
        better * (b_mean - s0_mean) AS gap,
        t95(welch_df(b_sd, b_n, s0_sd, s0_n)) * sqrt(b_sd ^ 2 / b_n + s0_sd ^ 2 / s0_n) AS gap_hw,
        better * (h_mean - s0_mean) AS heads_recovery,
        t95(welch_df(h_sd, h_n, s0_sd, s0_n)) * sqrt(h_sd ^ 2 / h_n + s0_sd ^ 2 / s0_n) AS heads_hw,
        better * (c_mean - s0_mean) AS conditioning_recovery,
        t95(welch_df(c_sd, c_n, s0_sd, s0_n)) * sqrt(c_sd ^ 2 / c_n + s0_sd ^ 2 / s0_n) AS cond_hw,
        better * (c_mean - b_mean) AS vs_baseline,
        t95(welch_df(c_sd, c_n, b_sd, b_n)) * sqrt(c_sd ^ 2 / c_n + b_sd ^ 2 / b_n) AS vs_base_hw,
        better * (h_mean - b_mean) AS heads_vs_baseline,
        t95(welch_df(h_sd, h_n, b_sd, b_n)) * sqrt(h_sd ^ 2 / h_n + b_sd ^ 2 / b_n) AS heads_vs_base_hw,
        better * (c_mean - h_mean) AS cond_minus_heads,
        t95(welch_df(c_sd, c_n, h_sd, h_n)) * sqrt(c_sd ^ 2 / c_n + h_sd ^ 2 / h_n) AS cmh_hw,
        least(b_n, s0_n, c_n, coalesce(h_n, 2)) >= 2 AS has_interval
    FROM treated t
    LEFT JOIN heads h USING (space, metric, family, depth)
    JOIN space_tolerance_at(getvariable('tolerance')) tol USING (space, metric)
),
bounded AS (
    SELECT *,
        -- the interval's ends, or the point value itself with a single seed (the verdict then says so)
        CASE WHEN has_interval THEN vs_baseline - vs_base_hw ELSE vs_baseline END AS vb_lo,
        CASE WHEN has_interval THEN vs_baseline + vs_base_hw ELSE vs_baseline END AS vb_hi,
        CASE WHEN has_interval THEN conditioning_recovery - cond_hw ELSE conditioning_recovery END AS cr_lo,
        CASE WHEN has_interval THEN conditioning_recovery + cond_hw ELSE conditioning_recovery END AS cr_hi,
        CASE WHEN has_interval THEN heads_vs_baseline - heads_vs_base_hw ELSE heads_vs_baseline END AS hb_lo,
        CASE WHEN has_interval THEN heads_vs_baseline + heads_vs_base_hw ELSE heads_vs_baseline END AS hb_hi,
        CASE WHEN has_interval THEN heads_recovery - heads_hw ELSE heads_recovery END AS hr_lo,
        CASE WHEN has_interval THEN heads_recovery + heads_hw ELSE heads_recovery END AS hr_hi
    FROM paired
)
SELECT space, metric, family, b_depth AS baseline_depth, depth, b_heads AS num_heads, b_head_dim AS head_dim,
       embed_dim, mlp_dim, b_kv AS num_kv_heads, conditioning, tol AS tolerance,
       b_n AS baseline_seeds, s0_n AS shallow_seeds, c_n AS conditioning_seeds, h_n AS heads_seeds,
       b_mean AS baseline_score, s0_mean AS shallow_score, c_mean AS conditioning_score, h_mean AS heads_score,
       h_heads AS heads_num_heads, h_head_dim AS heads_head_dim,
       gap, gap - gap_hw AS gap_lo, gap + gap_hw AS gap_hi,
       heads_recovery, heads_recovery - heads_hw AS heads_recovery_lo, heads_recovery + heads_hw AS heads_recovery_hi,
       conditioning_recovery, conditioning_recovery - cond_hw AS conditioning_recovery_lo,
       conditioning_recovery + cond_hw AS conditioning_recovery_hi,
       vs_baseline, vs_baseline - vs_base_hw AS vs_baseline_lo, vs_baseline + vs_base_hw AS vs_baseline_hi,
       cond_minus_heads, cond_minus_heads - cmh_hw AS cond_minus_heads_lo, cond_minus_heads + cmh_hw AS cond_minus_heads_hi,
       exp(c_log_kappa - s0_log_kappa) AS kappa_ratio, exp(h_log_kappa - s0_log_kappa) AS heads_kappa_ratio,
       pair_evidence(has_interval) AS evidence,
       CASE WHEN vb_lo >= -tol THEN 'closes the gap'
            WHEN vb_hi < -tol AND cr_lo > 0 THEN 'narrows the gap, does not close it'
            WHEN vb_hi < -tol AND cr_hi < 0 THEN 'widens the gap'
            WHEN vb_hi < -tol THEN 'no recovery: the gap stays'
            ELSE 'open'
       END || CASE WHEN has_interval THEN '' ELSE ' (single seed, not significant)' END AS verdict,
       CASE WHEN h_mean IS NULL THEN NULL
            WHEN hb_lo >= -tol THEN 'closes the gap'
            WHEN hb_hi < -tol AND hr_lo > 0 THEN 'narrows the gap, does not close it'
            WHEN hb_hi < -tol AND hr_hi < 0 THEN 'widens the gap'
            WHEN hb_hi < -tol THEN 'no recovery: the gap stays'
            ELSE 'open'
       END || CASE WHEN has_interval THEN '' ELSE ' (single seed, not significant)' END AS heads_verdict,
       CASE WHEN NOT has_interval OR h_mean IS NULL THEN NULL
            WHEN cond_minus_heads - cmh_hw >= -tol THEN true
            WHEN cond_minus_heads + cmh_hw < -tol THEN false
       END AS as_much_as_heads
FROM bounded
ORDER BY space, metric, family, embed_dim, mlp_dim, depth, conditioning;
