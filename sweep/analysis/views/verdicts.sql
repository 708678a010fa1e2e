-- Every config against its baseline, and the edges where the trade breaks along depth and head_dim.

-- space_tolerance_at(tolerance): the tolerance each (space, metric) is judged at, in the metric's units:
-- the argument when not NULL, else the space's own when it was set for this metric, else 0.5.
CREATE OR REPLACE MACRO space_tolerance_at(fixed_tolerance) AS TABLE
SELECT DISTINCT c.space, c.metric,
       coalesce(fixed_tolerance, CASE WHEN s.tolerance_metric = c.metric THEN s.space_tolerance END, 0.5) AS tol
FROM configs c
LEFT JOIN (SELECT space, tolerance AS space_tolerance, tolerance_metric FROM space_settings) s USING (space);

-- vs_baseline_at(tolerance): every config against its space's baseline (of its own model family, when a
-- space runs several side by side), on the space's headline metric, in that metric's units and direction.
-- The argument, a tolerance in those units, judges every space (NULL: each space's own, 0.5 when it has
-- none; the parameter is not called `tolerance`: DuckDB finds it ambiguous beside the `tolerance` column
-- of space_settings).
--   delta        = mean score of the config − mean score of the baseline (the metric's units)
--   Two 95% intervals of that difference, both Student t:
--   welch_lo/hi  = Welch: delta ∓ t95(welch_df) · √(s_c²/n_c + s_b²/n_b), welch_df by Welch–Satterthwaite;
--                  when both sides have ≥ 2 seeds
--   pooled_lo/hi = pooled residual variance: delta ∓ t95(pooled_df) · s_p · √(1/n_c + 1/n_b), with s_p and
--                  pooled_df = Σ (n_i − 1) over every config of the space, metric and family with ≥ 2
--                  seeds (variance_check); when the pool has ≥ 1 df and both sides ≥ 1 seed (a single
--                  seed's pooled interval is shown, never used: see below)
--   method: which one gave the verdict, in this order:
--     'none'        a side has no finished seed: inconclusive
--     'baseline'    the baseline itself: the reference, never a verdict of its own (verdict 'baseline')
--     'baseline at chance'  the baseline's mean score is at chance (configs.at_chance): it did not learn, so
--                   nothing can be judged against it: inconclusive, never significant
--     'single seed' one seed on either side: no interval: inconclusive, never significant (even where a
--                   pooled interval exists); point_verdict says which way delta leans against ∓tolerance
--     'pooled'      fewer than 3 seeds on a side (2 here) AND variance_check.equal_variance is TRUE (Bartlett
--                   does not reject equal variances across the pool's configs) AND both compared configs'
--                   spread_check.spread_in_line is TRUE (neither side's own spread is above the 5% F bound
--                   against the others'): borrows the other configs' spread, df = pooled_df instead of
--                   Welch's 1–2
--     'welch'       otherwise: 3+ seeds on both sides, or 2 seeds where one of those checks fails or cannot
--                   be made (method_reason then says which, with the p-value or ratio: the fallback, said so)
--   delta_lo/hi  = the chosen method's interval (pooled_lo/hi when method = 'pooled', else welch_lo/hi)
--   evidence:     'no finished seed' | 'baseline' | 'baseline at chance' | 'single seed' | 'welch t, 95%' |
--                 'pooled variance t, 95% (df=N)'
--   method_reason: why that method, in words
--   also: welch_df, pooled_sd (s_p), pooled_df, equal_variance_p (variance_check.bartlett_p)
--   verdict, metric_mode max (higher is better: top1, accuracy):
--                  'holds'  when delta_lo ≥ −tolerance   (confidently not worse by more than it)
--                  'breaks' when delta_hi < −tolerance   (confidently worse by more than it)
--            metric_mode min (lower is better: val_loss):
--                  'holds'  when delta_hi ≤ +tolerance   (confidently not worse by more than it)
--                  'breaks' when delta_lo > +tolerance   (confidently worse by more than it)
--                  'inconclusive' otherwise: the interval straddles a bound, a side has no finished seed or
--                                 only one (method 'single seed'), or the baseline is at chance
--                  'baseline'     the baseline's own row
--   So holds and breaks are exactly the significant verdicts: a config counted as holding or breaking
--   anywhere has ≥ 2 seeds on both sides and a baseline that learned.
--   point_verdict: 'holds' when gain ≥ −tolerance, else 'breaks', on the point difference alone (NULL for the
--                  baseline and without a finished seed): which way a single seed leans, never a verdict
--   significant: not the baseline, ≥ 2 seeds on both sides, a baseline that learned, and the interval clears
--                the tolerance either way (so: verdict in ('holds', 'breaks'))
--   chance_score: the metric's chance level; at_chance, baseline_at_chance: the config's and the baseline's
--                mean score at chance (configs.at_chance); n_unlearned, baseline_unlearned: seeds at chance
--                while a sibling learned (configs.n_unlearned; each is a row of unlearned_seeds)
--   gain, gain_lo, gain_hi: the same difference signed so that positive is better (−delta for min), on
--   which the verdict is one rule: holds when gain_lo ≥ −tolerance, breaks when gain_hi < −tolerance.
--   device_hours: what the config's verdict cost, configs.device_s_total / 3600 (every trial of the config)
CREATE OR REPLACE MACRO vs_baseline_at(fixed_tolerance) AS TABLE
WITH base AS (
    SELECT space, metric, family, config_id AS b_config_id, score_mean AS b_mean, score_sd AS b_sd, n_seeds AS b_n,
           params AS b_params,
           train_samples_per_s AS b_train, infer_samples_per_s AS b_infer, peak_mem_bytes AS b_mem,
           depth AS b_depth, head_dim AS b_head_dim, at_chance AS b_at_chance, n_unlearned AS b_unlearned,
           lr_arm  -- a tuned sweep's configs against its tuned baseline, an untuned one's against its own
    FROM configs WHERE is_baseline
),
paired AS (
    SELECT c.*, b.* EXCLUDE (space, metric, family, lr_arm), t.tol,
           v.pooled_sd, v.pooled_df, v.equal_variance, v.bartlett_p, v.note AS variance_note,
           sc.spread_in_line AS c_in_line, sc.spread_ratio AS c_spread_ratio, sc.spread_limit AS c_spread_limit,
           sb.spread_in_line AS b_in_line, sb.spread_ratio AS b_spread_ratio, sb.spread_limit AS b_spread_limit,
           c.score_mean - b.b_mean AS delta,
           c.score_sd ^ 2 / c.n_seeds + b.b_sd ^ 2 / b.b_n AS var_delta,
           welch_df(c.score_sd, c.n_seeds, b.b_sd, b.b_n) AS welch_df,
           better_sign(c.metric_mode) AS better  -- +1: higher is better
    FROM configs c JOIN base b USING (space, metric, family, lr_arm) JOIN space_tolerance_at(fixed_tolerance) t USING (space, metric)
    LEFT JOIN variance_check v USING (space, metric, family)
    LEFT JOIN spread_check sc ON sc.space = c.space AND sc.metric = c.metric AND sc.config_id = c.config_id
    LEFT JOIN spread_check sb ON sb.space = c.space AND sb.metric = c.metric AND sb.config_id = b.b_config_id
),
intervals AS (
    SELECT *,
        delta - t95(welch_df) * sqrt(var_delta) AS welch_lo,
        delta + t95(welch_df) * sqrt(var_delta) AS welch_hi,
        CASE WHEN n_seeds >= 1 AND b_n >= 1 THEN delta - t95(pooled_df) * pooled_sd * sqrt(1.0 / n_seeds + 1.0 / b_n)
        END AS pooled_lo,
        CASE WHEN n_seeds >= 1 AND b_n >= 1 THEN delta + t95(pooled_df) * pooled_sd * sqrt(1.0 / n_seeds + 1.0 / b_n)
        END AS pooled_hi,
        CASE
            WHEN n_seeds = 0 OR b_n = 0 THEN 'none'
            WHEN is_baseline THEN 'baseline'
            WHEN b_at_chance THEN 'baseline at chance'
            WHEN n_seeds = 1 OR b_n = 1 THEN 'single seed'
            WHEN least(n_seeds, b_n) < 3 AND equal_variance AND pooled_df >= 1
                 AND coalesce(c_in_line, false) AND coalesce(b_in_line, false) THEN 'pooled'
            ELSE 'welch'
        END AS method
    FROM paired
),
chosen AS (
    SELECT *,
        CASE WHEN method = 'pooled' THEN pooled_lo ELSE welch_lo END AS delta_lo,
        CASE WHEN method = 'pooled' THEN pooled_hi ELSE welch_hi END AS delta_hi
    FROM intervals
),
gains AS (
    SELECT *,
        better * delta AS gain,
        signed_lo(better, delta_lo, delta_hi) AS gain_lo,
        signed_hi(better, delta_lo, delta_hi) AS gain_hi
    FROM chosen
)
SELECT
    space, config_id, family, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, head_dim_rule,
    -- @question-axis-columns (sweep/analysis/views/__init__.py core_sql names each declared axis here, Question.axes)
    lr_arm, is_baseline, n_seeds, b_n AS baseline_seeds, n_failed, metric, metric_mode, score_mean, score_sd,
    b_mean AS baseline_score, delta, delta_lo, delta_hi, welch_df, tol AS tolerance, gain, gain_lo, gain_hi,
    100.0 * (params - b_params) / b_params AS delta_params_pct,
    100.0 * (train_samples_per_s - b_train) / b_train AS delta_train_throughput_pct,
    100.0 * (infer_samples_per_s - b_infer) / b_infer AS delta_infer_throughput_pct,
    100.0 * (peak_mem_bytes - b_mem) / b_mem AS delta_mem_pct,
    params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes, kappa_mean,
    kv_cache_bytes_per_token, token_latency_ms,
    device_s_total / 3600 AS device_hours,  -- what this config's verdict cost: its trials' device-hours, all of them
    b_depth AS baseline_depth, b_head_dim AS baseline_head_dim,
    chance_score, at_chance, b_at_chance AS baseline_at_chance, n_unlearned, b_unlearned AS baseline_unlearned,
    CASE method
        WHEN 'none' THEN 'no finished seed'
        WHEN 'baseline' THEN 'baseline'
        WHEN 'baseline at chance' THEN 'baseline at chance'
        WHEN 'single seed' THEN 'single seed'
        WHEN 'pooled' THEN 'pooled variance t, 95% (df=' || pooled_df || ')'
        ELSE 'welch t, 95%'
    END AS evidence,
    CASE
        WHEN is_baseline THEN 'baseline'  -- the reference, never a verdict
        WHEN method IN ('none', 'baseline at chance', 'single seed') THEN 'inconclusive'
        WHEN gain_lo >= -tol THEN 'holds'
        WHEN gain_hi < -tol THEN 'breaks'
        ELSE 'inconclusive'
    END AS verdict,
    CASE WHEN NOT is_baseline AND gain IS NOT NULL THEN CASE WHEN gain >= -tol THEN 'holds' ELSE 'breaks' END
    END AS point_verdict,
    (method IN ('pooled', 'welch') AND (gain_lo >= -tol OR gain_hi < -tol)) AS significant,
    method,
    CASE method
        WHEN 'none' THEN 'a side has no finished seed'
        WHEN 'baseline' THEN 'the reference'
        WHEN 'baseline at chance' THEN printf('the baseline did not learn (mean %.4g, chance %.4g): no verdict rests '
                                              || 'on it', b_mean, chance_score)
        WHEN 'single seed' THEN 'one seed on a side: no interval, so no verdict (point_verdict: the way delta leans)'
        WHEN 'pooled' THEN 'fewer than 3 seeds on a side; ' || variance_note
        ELSE CASE
            WHEN least(n_seeds, b_n) >= 3 THEN '3+ seeds on both sides'
            WHEN NOT coalesce(equal_variance, false) OR variance_note IS NULL THEN
                'fewer than 3 seeds on a side; ' || coalesce(variance_note,
                'equal variances cannot be checked (fewer than 2 configs with 2+ seeds): Welch, not pooled')
            WHEN NOT coalesce(c_in_line, false) THEN
                printf('fewer than 3 seeds on a side; the config''s spread is out of line with the other configs'' '
                       || '(variance ratio %.3g > F bound %.3g): Welch, not pooled', c_spread_ratio, c_spread_limit)
            ELSE printf('fewer than 3 seeds on a side; the baseline''s spread is out of line with the other configs'' '
                        || '(variance ratio %.3g > F bound %.3g): Welch, not pooled', b_spread_ratio, b_spread_limit)
        END
    END AS method_reason,
    welch_lo, welch_hi, pooled_sd, pooled_df, pooled_lo, pooled_hi, bartlett_p AS equal_variance_p
FROM gains;

CREATE OR REPLACE VIEW vs_baseline AS
FROM vs_baseline_at(getvariable('tolerance'));

-- depth_edge: along depth, for each (space, num_heads, head_dim, each question's axis) at the baseline's
-- width and MLP (and per model family and headline metric: a space of one family judged on one metric has one row per shape;
-- and per lr_arm: a tuned sweep's edges apart from an untuned one's in the same results). Read from the verdicts, so it
-- works alike for metrics where higher is better and where lower is.
--   holds_down_to_depth: the shallowest depth (at or below the baseline's) whose verdict is holds, with
--                        every tried depth between it and the baseline's holding too (the baseline's own
--                        row is the reference, not a hold: NULL when nothing else holds; single seeds are
--                        inconclusive, so no edge rests on one)
--   breaks_at_depth:     the deepest tried depth below that whose verdict is breaks (NULL if none)
CREATE OR REPLACE VIEW depth_edge AS
WITH ranked AS (
    SELECT *,
        -- non-holding depths from the baseline's depth down to this one: 0 means all of them hold
        sum(CASE WHEN verdict IN ('holds', 'baseline') THEN 0 ELSE 1 END) OVER (
            PARTITION BY space, metric, family, lr_arm, num_heads, head_dim, embed_dim, mlp_dim/*@axes*/
            ORDER BY depth DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE depth <= baseline_depth
)
SELECT space, metric, family, lr_arm, num_heads, head_dim, embed_dim, mlp_dim/*@axes*/,
    min(depth) FILTER (WHERE misses_above = 0 AND verdict = 'holds') AS holds_down_to_depth,
    -- rows with misses_above >= 1 are exactly the depths below holds_down_to_depth
    max(depth) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_depth,
    list(depth ORDER BY depth) AS depths_tried,
    list(verdict ORDER BY depth) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, family, embed_dim, mlp_dim, num_heads, head_dim/*@axes-order*/;

-- head_dim_edge: along head_dim at fixed d_model (the fixed_d_model arm), for each (space, depth) (and per
-- model family and headline metric, query heads per key/value head, and conditioning intervention).
--   holds_down_to_head_dim: the smallest head_dim (at or below the baseline's) that holds, with every
--                           tried head_dim between it and the baseline's holding too (the baseline is the
--                           reference, not a hold)
--   breaks_at_head_dim:     the largest tried head_dim below that whose verdict is breaks (NULL if none)
CREATE OR REPLACE VIEW head_dim_edge AS
WITH ranked AS (
    SELECT *,
        sum(CASE WHEN verdict IN ('holds', 'baseline') THEN 0 ELSE 1 END) OVER (
            PARTITION BY space, metric, family, lr_arm, depth, embed_dim, mlp_dim/*@axes-across-heads*/
            ORDER BY head_dim DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE attn_dim = embed_dim AND head_dim <= baseline_head_dim
)
SELECT space, metric, family, lr_arm, depth, embed_dim, mlp_dim/*@axes-across-heads AS*/,
    min(head_dim) FILTER (WHERE misses_above = 0 AND verdict = 'holds') AS holds_down_to_head_dim,
    max(head_dim) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_head_dim,
    list(head_dim ORDER BY head_dim) AS head_dims_tried,
    list(verdict ORDER BY head_dim) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, family, embed_dim, mlp_dim, depth/*@axes-across-heads names*/;
