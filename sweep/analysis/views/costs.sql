-- At equal cost: the Pareto front of score against params, and each config against the nearest of
-- equal params or FLOPs (matched budgets).

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
SELECT space, config_id, metric, metric_mode, family, depth, num_heads, head_dim, embed_dim, mlp_dim,
       attn_dim/*@axes*/, n_seeds, score_mean, score_se, params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes,
       kappa_mean, is_baseline
FROM ranked
WHERE (best_with_fewer_params IS NULL OR goodness > best_with_fewer_params)
  AND goodness = best_with_same_params
ORDER BY space, params;

-- matched_budget_at(tolerance): each non-baseline config against the config of its space nearest to it in
-- cost, for three costs: is this shape better than what the same budget buys otherwise?
--   cost_kind     'params'     parameters (count)
--                 'flops'      forward FLOPs per sample (flops_per_sample)
--                 'train_time' seconds of training per sample: configs.train_s_per_sample, the mean over
--                              the config's finished seeds of 1 / train_samples_per_s (measured, so it
--                              carries the machine's noise)
--   candidates    the configs of the same space, headline metric and model family (each family carries
--                 its own baseline, as in vs_baseline: the trials do not record which family is the space's
--                 `model.family`, so in a space of several families each is matched within itself; in a
--                 one-family space that is every config), other than the config itself, with ≥ 1 finished
--                 seed and that cost known (> 0)
--   nearest       smallest |ln(cost / matched_cost)| (rounded to 1e-9, so a factor 2 up and a factor 2 down
--                 tie); ties go to the candidate with the better mean score (by the metric's direction:
--                 the toughest rival at that cost; at fixed d_model many shapes share params), then to
--                 the smaller config_id
--   cost, matched_cost: the two costs, in the units above; cost_ratio = cost / matched_cost
--   delta         = mean score of the config − mean score of the matched config, in the metric's units,
--                   NOT direction-aware (as vs_baseline.delta: for a min metric a negative delta is better)
--   delta_lo/hi   = its 95% Welch interval (welch_df; both sides ≥ 2 seeds; as vs_baseline's welch_lo/hi)
--   gain, gain_lo, gain_hi: the same signed so that positive is better (−delta for min), as in vs_baseline
--   tolerance     as vs_baseline_at's (the argument, else the space's own, else 0.5), metric's units
--   verdict on the gain interval, both sides ≥ 2 seeds:
--                 'wins'                   gain_lo > +tolerance  (confidently better by more than it)
--                 'loses'                  gain_hi < −tolerance  (confidently worse by more than it)
--                 'tie (within tolerance)' −tolerance ≤ gain_lo and gain_hi ≤ +tolerance
--                 'inconclusive'           otherwise
--           with one seed on a side (evidence 'single seed', never significant): the same on gain alone,
--           gain > +tol wins, gain < −tol loses, else tie (within tolerance)
--   evidence 'welch t, 95%' | 'single seed'; significant: both sides ≥ 2 seeds and not inconclusive
CREATE OR REPLACE MACRO matched_budget_at(fixed_tolerance) AS TABLE
WITH costed AS (
    SELECT *, 'params' AS cost_kind, params::DOUBLE AS cost FROM configs
    UNION ALL
    SELECT *, 'flops' AS cost_kind, flops_per_sample::DOUBLE AS cost FROM configs
    UNION ALL
    SELECT *, 'train_time' AS cost_kind, train_s_per_sample AS cost FROM configs
),
finished AS (
    SELECT *, CASE WHEN metric_mode = 'min' THEN -score_mean ELSE score_mean END AS goodness
    FROM costed
    WHERE n_seeds > 0 AND score_mean IS NOT NULL AND cost > 0
),
ranked AS (
    SELECT c.space, c.metric, c.metric_mode, c.family, c.config_id, c.depth, c.num_heads, c.head_dim, c.embed_dim,
           c.mlp_dim, c.attn_dim/*@axes c.*/, c.n_seeds, c.score_mean, c.score_sd, c.cost_kind,
           c.cost,
           m.config_id AS matched_config_id, m.depth AS matched_depth, m.num_heads AS matched_num_heads,
           m.head_dim AS matched_head_dim, m.embed_dim AS matched_embed_dim, m.mlp_dim AS matched_mlp_dim,
           m.attn_dim AS matched_attn_dim/*@axes m. AS matched_*/, coalesce(m.is_baseline, false) AS matched_is_baseline,
           m.n_seeds AS matched_n_seeds, m.score_mean AS matched_score, m.score_sd AS matched_sd,
           m.cost AS matched_cost,
           row_number() OVER (PARTITION BY c.space, c.metric, c.family, c.config_id, c.cost_kind
                              ORDER BY round(abs(ln(c.cost / m.cost)), 9), m.goodness DESC, m.config_id) AS nearness
    FROM finished c
    JOIN finished m
      ON m.space = c.space AND m.metric = c.metric AND m.family IS NOT DISTINCT FROM c.family
     AND m.cost_kind = c.cost_kind AND m.config_id <> c.config_id
    WHERE NOT coalesce(c.is_baseline, false)
),
compared AS (
    SELECT r.*, t.tol,
           r.score_mean - r.matched_score AS delta,
           welch_df(r.score_sd, r.n_seeds, r.matched_sd, r.matched_n_seeds) AS welch_df,
           sqrt(r.score_sd ^ 2 / r.n_seeds + r.matched_sd ^ 2 / r.matched_n_seeds) AS delta_se,
           better_sign(r.metric_mode) AS better
    FROM ranked r JOIN space_tolerance_at(fixed_tolerance) t USING (space, metric)
    WHERE r.nearness = 1
),
intervals AS (
    SELECT *, delta - t95(welch_df) * delta_se AS delta_lo, delta + t95(welch_df) * delta_se AS delta_hi
    FROM compared
),
gains AS (
    SELECT *, better * delta AS gain,
           signed_lo(better, delta_lo, delta_hi) AS gain_lo,
           signed_hi(better, delta_lo, delta_hi) AS gain_hi,
           n_seeds >= 2 AND matched_n_seeds >= 2 AS has_interval
    FROM intervals
),
judged AS (
    SELECT *,
        rival_verdict(has_interval, gain, gain_lo, gain_hi, tol) AS verdict
    FROM gains
)
SELECT space, metric, metric_mode, family, config_id, depth, num_heads, head_dim, embed_dim, mlp_dim,
       attn_dim/*@axes*/, n_seeds, score_mean, cost_kind, cost,
       matched_config_id, matched_depth, matched_num_heads, matched_head_dim, matched_embed_dim, matched_mlp_dim,
       matched_attn_dim/*@axes matched_*/, matched_is_baseline, matched_n_seeds, matched_score, matched_cost,
       cost / matched_cost AS cost_ratio,
       delta, delta_lo, delta_hi, welch_df, gain, gain_lo, gain_hi, tol AS tolerance,
       pair_evidence(has_interval) AS evidence,
       verdict,
       has_interval AND verdict <> 'inconclusive' AS significant
FROM judged
ORDER BY space, metric, family, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, config_id,
         CASE cost_kind WHEN 'params' THEN 1 WHEN 'flops' THEN 2 ELSE 3 END;

CREATE OR REPLACE VIEW matched_budget AS
FROM matched_budget_at(getvariable('tolerance'));
