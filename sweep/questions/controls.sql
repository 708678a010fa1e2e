-- The control arms' view (sweep/questions/controls.py).

-- mlp_control_at(tolerance): do fewer blocks with more heads beat the space's control arms at matched
-- parameters? A control arm is a config a space's `controls:` adds or labels (configs.control, e.g. half_mlp:
-- the baseline's depth and heads with the MLP hidden width halved, the other way to cut a third of ViT-B).
-- One row per (config, control) of the same space, headline metric and model family:
--   config        a config with fewer blocks than the baseline (depth < the is_baseline config's depth; with
--                 several baseline rows in a space, the one with the most seeds), not itself a control, with
--                 ≥ 1 finished seed; more_heads: num_heads > the baseline's num_heads ("fewer layers, more
--                 heads"); configs with as many heads or fewer are listed too, more_heads FALSE
--   control       the label, and the control config's id, shape, seeds and mean score (≥ 1 finished seed)
--   params, control_params: the two parameter counts; params_ratio = params / control_params
--   matched       |params_ratio − 1| ≤ 0.05: within ±5% of the control's parameters
--   delta         = mean score of the config − mean score of the control, in the metric's units, NOT
--                   direction-aware (as matched_budget's: for a min metric a negative delta is better)
--   delta_lo/hi   = its 95% Welch interval, delta ∓ t95(welch_df) · √(s_c²/n_c + s_k²/n_k), welch_df by
--                   Welch–Satterthwaite (welch_df); both sides ≥ 2 seeds, else NULL
--   gain, gain_lo, gain_hi: the same signed so that positive is better (−delta for min)
--   tolerance     as vs_baseline_at's (the argument, else the space's own, else 0.5), metric's units
--   verdict       the words of matched_budget_at, on the gain interval, both sides ≥ 2 seeds:
--                   'wins'                   gain_lo > +tolerance
--                   'loses'                  gain_hi < −tolerance
--                   'tie (within tolerance)' −tolerance ≤ gain_lo and gain_hi ≤ +tolerance
--                   'inconclusive'           otherwise
--                 with one seed on a side (evidence 'single seed', never significant): on gain alone, gain >
--                 +tol wins, gain < −tol loses, else tie (within tolerance)
--   evidence      'welch t, 95%' | 'single seed'; significant: both sides ≥ 2 seeds and not inconclusive
--   best_at_or_under: TRUE on one row per (space, metric, family, control): among the more_heads configs
--                 with params ≤ control_params, the best mean score (by the metric's direction), then fewer
--                 params, then the smaller config_id. Its verdict answers "do extra heads beat this control
--                 at no more parameters?"; no such row when no "fewer layers, more heads" config is that lean.
CREATE OR REPLACE MACRO mlp_control_at(fixed_tolerance) AS TABLE
WITH finished AS (
    SELECT *, CASE WHEN metric_mode = 'min' THEN -score_mean ELSE score_mean END AS goodness
    FROM configs WHERE n_seeds > 0 AND score_mean IS NOT NULL
),
base AS (
    SELECT space, metric, family, arg_max(depth, n_seeds) AS b_depth, arg_max(num_heads, n_seeds) AS b_heads
    FROM configs WHERE is_baseline GROUP BY space, metric, family
),
paired AS (
    SELECT c.space, c.metric, c.metric_mode, c.family, c.config_id, c.depth, c.num_heads, c.head_dim, c.embed_dim,
           c.mlp_dim, c.attn_dim, c.n_seeds, c.score_mean, c.score_sd, c.params, c.goodness,
           c.num_heads > b.b_heads AS more_heads, b.b_depth AS baseline_depth, b.b_heads AS baseline_num_heads,
           k.control, k.config_id AS control_config_id, k.depth AS control_depth, k.num_heads AS control_num_heads,
           k.head_dim AS control_head_dim, k.embed_dim AS control_embed_dim, k.mlp_dim AS control_mlp_dim,
           k.n_seeds AS control_n_seeds, k.score_mean AS control_score, k.score_sd AS control_sd,
           k.params AS control_params, t.tol,
           c.score_mean - k.score_mean AS delta,
           welch_df(c.score_sd, c.n_seeds, k.score_sd, k.n_seeds) AS welch_df,
           sqrt(c.score_sd ^ 2 / c.n_seeds + k.score_sd ^ 2 / k.n_seeds) AS delta_se,
           better_sign(c.metric_mode) AS better,
           c.n_seeds >= 2 AND k.n_seeds >= 2 AS has_interval
    FROM finished c
    JOIN base b ON b.space = c.space AND b.metric = c.metric AND b.family IS NOT DISTINCT FROM c.family
    JOIN finished k ON k.space = c.space AND k.metric = c.metric AND k.family IS NOT DISTINCT FROM c.family
     AND k.control IS NOT NULL AND k.config_id <> c.config_id
    JOIN space_tolerance_at(fixed_tolerance) t ON t.space = c.space AND t.metric = c.metric
    WHERE c.depth < b.b_depth AND c.control IS NULL
),
intervals AS (
    SELECT *,
        CASE WHEN has_interval THEN delta - t95(welch_df) * delta_se END AS delta_lo,
        CASE WHEN has_interval THEN delta + t95(welch_df) * delta_se END AS delta_hi
    FROM paired
),
gains AS (
    SELECT *, better * delta AS gain,
           signed_lo(better, delta_lo, delta_hi) AS gain_lo,
           signed_hi(better, delta_lo, delta_hi) AS gain_hi
    FROM intervals
),
judged AS (
    SELECT *,
        rival_verdict(has_interval, gain, gain_lo, gain_hi, tol) AS verdict,
        CASE WHEN more_heads AND params <= control_params THEN
            row_number() OVER (PARTITION BY space, metric, family, control, more_heads AND params <= control_params
                               ORDER BY goodness DESC, params, config_id)
        END AS rank_at_or_under
    FROM gains
)
SELECT space, metric, metric_mode, family, config_id, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim,
       more_heads, baseline_depth, baseline_num_heads, n_seeds, score_mean,
       control, control_config_id, control_depth, control_num_heads, control_head_dim, control_embed_dim,
       control_mlp_dim, control_n_seeds, control_score,
       params, control_params, params::DOUBLE / control_params AS params_ratio,
       abs(params::DOUBLE / control_params - 1) <= 0.05 AS matched,
       delta, delta_lo, delta_hi, welch_df, gain, gain_lo, gain_hi, tol AS tolerance,
       pair_evidence(has_interval) AS evidence,
       verdict,
       has_interval AND verdict <> 'inconclusive' AS significant,
       coalesce(rank_at_or_under = 1, false) AS best_at_or_under
FROM judged
ORDER BY space, metric, family, control, depth, num_heads, head_dim, embed_dim, mlp_dim, config_id;

CREATE OR REPLACE VIEW mlp_control AS
FROM mlp_control_at(getvariable('tolerance'));
