-- The budget question's views (sweep/questions/budget.py).

-- budget_ways: a parameter budget spent three ways (a space's `budget:` block, sweep/questions/budget.py), side by
-- side. One row per config that carries a budget_way (its base, and each of deeper, wider and more_heads
-- the plan could match), per space, headline metric, model family and budget target:
--   budget_way     'base' | 'deeper' | 'wider' | 'more_heads' (way_order 0 … 3)
--   target_params  the budget's target, parameters (trials.budget_target_params)
--   params_miss    params / target_params − 1: the relative miss (+0.007 is 0.7% over; the base's is
--                  −0.5 for a target of twice its params)
--   n_seeds, score_mean, score_sd: the finished seeds' (configs), in the metric's units
--   score_lo/hi    the mean's 95% t interval, score_mean ∓ t95(n_seeds − 1) · score_sd / √n_seeds (NULL with
--                  one seed: a single seed has no interval)
--   flops_per_sample, train_samples_per_s, infer_samples_per_s, kappa_mean: as in configs
--   rank           1 for the way (deeper, wider, more_heads) with the best mean score by the metric's
--                  direction (ties share a rank); NULL for the base and for ways without a finished seed.
--                  A rank is not a verdict: budget_pairs says which differences the seeds support.
-- A results folder holding two recipes of one space at one target (two profiles) gives a row for each config.
CREATE OR REPLACE VIEW budget_ways AS
WITH ways AS (
    SELECT *, budget_target_params AS target_params,
           CASE budget_way WHEN 'base' THEN 0 WHEN 'deeper' THEN 1 WHEN 'wider' THEN 2 WHEN 'more_heads' THEN 3
                           ELSE 4 END AS way_order,
           CASE WHEN metric_mode = 'min' THEN -score_mean ELSE score_mean END AS goodness
    FROM configs WHERE budget_way IS NOT NULL
)
SELECT space, metric, metric_mode, family, target_params, budget_way, way_order, config_id, is_baseline,
       depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim, n_seeds, n_failed, score_mean, score_sd,
       CASE WHEN n_seeds >= 2 THEN score_mean - t95(n_seeds - 1) * score_sd / sqrt(n_seeds) END AS score_lo,
       CASE WHEN n_seeds >= 2 THEN score_mean + t95(n_seeds - 1) * score_sd / sqrt(n_seeds) END AS score_hi,
       params, params::DOUBLE / target_params - 1 AS params_miss, flops_per_sample, train_samples_per_s,
       infer_samples_per_s, kappa_mean,
       CASE WHEN budget_way <> 'base' AND n_seeds > 0 AND score_mean IS NOT NULL THEN
           rank() OVER (PARTITION BY space, metric, family, target_params,
                                     budget_way <> 'base' AND n_seeds > 0 AND score_mean IS NOT NULL
                        ORDER BY goodness DESC)
       END AS rank
FROM ways
ORDER BY space, metric, family, target_params, way_order, config_id;

-- budget_pairs_at(tolerance): the ways of each budget against each other, one row per pair in the order
-- (deeper, wider), (deeper, more_heads), (wider, more_heads), per space, headline metric, model family and
-- target (budget_ways' groups), where both ways have a finished seed. `a` is the first of the pair, `b` the
-- second; both spend the same budget (each within the plan's tolerance of the target):
--   n_a, n_b, score_a, score_b, params_a, params_b, config_a, config_b: each way's (budget_ways)
--   params_ratio  params_a / params_b
--   delta         score_a − score_b, in the metric's units, NOT direction-aware (as matched_budget.delta)
--   delta_lo/hi   its 95% Welch interval, delta ∓ t95(welch_df) · √(s_a² / n_a + s_b² / n_b), welch_df by
--                 Welch–Satterthwaite (welch_df); both sides ≥ 2 seeds
--   gain, gain_lo, gain_hi: the same signed so that positive means `a` is better (−delta for a min metric)
--   tolerance     as vs_baseline_at's (the argument, else the space's own, else 0.5), metric's units
--   verdict, of `a` against `b`, exactly as matched_budget_at's:
--                 'wins'                   gain_lo > +tolerance
--                 'loses'                  gain_hi < −tolerance
--                 'tie (within tolerance)' −tolerance ≤ gain_lo and gain_hi ≤ +tolerance
--                 'inconclusive'           otherwise
--           with one seed on a side (evidence 'single seed', never significant): gain > +tol wins,
--           gain < −tol loses, else tie (within tolerance)
--   evidence 'welch t, 95%' | 'single seed'; significant: both sides ≥ 2 seeds and not inconclusive
CREATE OR REPLACE MACRO budget_pairs_at(fixed_tolerance) AS TABLE
WITH ways AS (
    SELECT * FROM budget_ways WHERE way_order BETWEEN 1 AND 3 AND n_seeds > 0 AND score_mean IS NOT NULL
),
paired AS (
    SELECT a.space, a.metric, a.metric_mode, a.family, a.target_params,
           a.budget_way AS way_a, b.budget_way AS way_b, a.way_order AS order_a, b.way_order AS order_b,
           a.config_id AS config_a, b.config_id AS config_b, a.n_seeds AS n_a, b.n_seeds AS n_b,
           a.score_mean AS score_a, b.score_mean AS score_b, a.score_sd AS sd_a, b.score_sd AS sd_b,
           a.params AS params_a, b.params AS params_b,
           a.score_mean - b.score_mean AS delta,
           welch_df(a.score_sd, a.n_seeds, b.score_sd, b.n_seeds) AS welch_df,
           sqrt(a.score_sd ^ 2 / a.n_seeds + b.score_sd ^ 2 / b.n_seeds) AS delta_se,
           better_sign(a.metric_mode) AS better,
           a.n_seeds >= 2 AND b.n_seeds >= 2 AS has_interval
    FROM ways a JOIN ways b
      ON b.space = a.space AND b.metric = a.metric AND b.family IS NOT DISTINCT FROM a.family
     AND b.target_params IS NOT DISTINCT FROM a.target_params AND b.way_order > a.way_order
),
intervals AS (
    SELECT p.*, t.tol,
           delta - t95(welch_df) * delta_se AS delta_lo, delta + t95(welch_df) * delta_se AS delta_hi
    FROM paired p JOIN space_tolerance_at(fixed_tolerance) t USING (space, metric)
),
gains AS (
    SELECT *, better * delta AS gain,
           signed_lo(better, delta_lo, delta_hi) AS gain_lo,
           signed_hi(better, delta_lo, delta_hi) AS gain_hi
    FROM intervals
),
judged AS (
    SELECT *,
        rival_verdict(has_interval, gain, gain_lo, gain_hi, tol) AS verdict
    FROM gains
)
SELECT space, metric, metric_mode, family, target_params, way_a, way_b, config_a, config_b, n_a, n_b,
       score_a, score_b, params_a, params_b, params_a::DOUBLE / params_b AS params_ratio,
       delta, delta_lo, delta_hi, welch_df, gain, gain_lo, gain_hi, tol AS tolerance,
       pair_evidence(has_interval) AS evidence,
       verdict,
       has_interval AND verdict <> 'inconclusive' AS significant
FROM judged
ORDER BY space, metric, family, target_params, order_a, order_b, config_a, config_b;

CREATE OR REPLACE VIEW budget_pairs AS
FROM budget_pairs_at(getvariable('tolerance'));
