-- The edge search (`search: {kind: edge, ...}`, issue 40; docs/analysis.md#the-edge-search): each config of an
-- edge-search space with its measured verdict and the verdict the monotone assumption implies, and each column's
-- edge. The statistic is the one sweep/analysis/edge.py decides with (the searcher's), not vs_baseline's:
-- a pooled-variance t interval at the Bonferroni level over a config's looks.
--
-- A config never trained has no row in trials, so it appears here only as 'untried' (with its implied verdict,
-- if any): configs, vs_baseline, the Pareto front (pareto), matched_budget, the throughput (configs) and the
-- κ views (kappa_vs_heads, kappa_accuracy) read trials and show NOTHING for it: no row, never a guess.

-- t_quantile(p, dof): the Student t quantile at level p (0.5 < p < 1) for a whole number of degrees of freedom
-- dof ≥ 1 (NULL otherwise): scipy.stats.t.ppf(p, dof) within 1e-6 at every level 1 − α/(2L) for α from 0.2 to
-- 0.001 and L from 1 to 20, dof 1 to 100000 (tests/sweep/analysis/views/test_edge.py checks 1e-4 against scipy).
-- DuckDB has no t quantile; this is
--   1. Hill's approximation (Algorithm 396, Comm. ACM 13(10), 1970), on the normal quantile of Acklam's
--      rational approximation (relative error 1.2e-9): within 7.5e-4 (at dof 3–12 in the far tail), 1e-5 from
--      dof 17 on;
--   2. for dof ≤ 1000, one Newton step on the exact t distribution of whole dof (Abramowitz & Stegun 26.7.3–4:
--      with θ = atan(t/√dof), P(|T| ≤ t) = 2θ/π + (2/π) sinθ Σ_k c_k cos^(2k+1)θ for odd dof, sinθ Σ_k c_k cos^(2k)θ
--      for even dof), which brings it within 4e-7 (a Newton step from Hill's start, in Python, over those levels).
CREATE OR REPLACE MACRO normal_central_z(u, r) AS  -- Acklam's central region, u = p − 0.5, r = u²
    (((((-3.969683028665376e+01 * r + 2.209460984245205e+02) * r - 2.759285104469687e+02) * r
        + 1.383577518672690e+02) * r - 3.066479806614716e+01) * r + 2.506628277459239e+00) * u
    / (((((-5.447609879822406e+01 * r + 1.615858368580409e+02) * r - 1.556989798598866e+02) * r
        + 6.680131188771972e+01) * r - 1.328068155288572e+01) * r + 1);
CREATE OR REPLACE MACRO normal_upper_tail_z(q) AS CASE  -- z with P(Z > z) = q, 0 < q ≤ 0.5 (Acklam)
    WHEN q < 0.02425 THEN
        (((((-7.784894002430293e-03 * sqrt(-2 * ln(q)) - 3.223964580411365e-01) * sqrt(-2 * ln(q))
             - 2.400758277161838e+00) * sqrt(-2 * ln(q)) - 2.549732539343734e+00) * sqrt(-2 * ln(q))
             + 4.374664141464968e+00) * sqrt(-2 * ln(q)) + 2.938163982698783e+00)
        / -((((7.784695709041462e-03 * sqrt(-2 * ln(q)) + 3.224671290700398e-01) * sqrt(-2 * ln(q))
             + 2.445134137142996e+00) * sqrt(-2 * ln(q)) + 3.754408661907416e+00) * sqrt(-2 * ln(q)) + 1)
    ELSE normal_central_z(0.5 - q, (0.5 - q) ^ 2)
END;

-- Hill's algorithm in its own terms: P = 2(1 − p) (two-tailed), n = dof, a = 1/(n − ½), b = 48/a²,
-- c = ((20700 a/b − 98) a − 16) a + 96.36, d = ((94.5/(b + c) − 3)/b + 1) √(aπ/2) n, y = (dP)^(2/n); t = √(n·y')
-- (y' by the normal branch when y > 0.05 + a, else by the small-P series). Each step is a column of the
-- subquery below, computed once (nested macros would copy an argument into every place it is used).
CREATE OR REPLACE MACRO hill_expm1(y) AS CASE WHEN y > 0.002 THEN exp(y) - 1 ELSE 0.5 * y * y + y END;
CREATE OR REPLACE MACRO hill_small(y, n, d) AS
    ((1 / (((n + 6) / (n * y) - 0.089 * d - 0.822) * (n + 2) * 3) + 0.5 / (n + 4)) * y - 1) * (n + 1) / (n + 2) + 1 / y;
CREATE OR REPLACE MACRO hill_normal(a, b, c, x) AS
    hill_expm1(a * (((((0.4 * x ^ 2 + 6.3) * x ^ 2 + 36) * x ^ 2 + 94.5) / c - x ^ 2 - 3) / b + 1) ^ 2 * x ^ 2);

-- The exact t distribution of whole n (A&S 26.7.3–4), at θ = atan(t/√n), as sums of terms each one exp of
-- logs: t_central_odd_sum(θ, n) = Σ_{k=1}^{(n−3)/2} [k! Γ(3/2)/Γ(k + 3/2)] cos^(2k+1)θ, and
-- t_central_even_sum(θ, n) = Σ_{k=1}^{(n−2)/2} [Γ(k + ½)/(Γ(½) k!)] cos^(2k)θ.
CREATE OR REPLACE MACRO t_central_odd_sum(th, n) AS coalesce(
    (SELECT sum(exp(lgamma(k + 1) + lgamma(1.5) - lgamma(k + 1.5) + (2 * k + 1) * ln(cos(th))))
     FROM range(1, (n - 3) // 2 + 1) AS terms(k)), 0);
CREATE OR REPLACE MACRO t_central_even_sum(th, n) AS coalesce(
    (SELECT sum(exp(lgamma(k + 0.5) - lgamma(0.5) - lgamma(k + 1) + 2 * k * ln(cos(th))))
     FROM range(1, (n - 2) // 2 + 1) AS terms(k)), 0);

CREATE OR REPLACE MACRO t_quantile(p, dof) AS (
    SELECT CASE WHEN valid THEN
        CASE WHEN n <= 1000 THEN t0 - (central - (2 * level - 1)) / (2 * density) ELSE t0 END
    END
    FROM (
        SELECT *,
            CASE WHEN n > 1000 THEN 0  -- one Newton step only up to 1000 df (Hill alone is within 1e-5 there)
                 WHEN n % 2 = 1 THEN 2 / pi() * (th + CASE WHEN n > 1 THEN sin(th) * (cos(th) + t_central_odd_sum(th, n))
                                                          ELSE 0 END)
                 ELSE sin(th) * (1 + t_central_even_sum(th, n))
            END AS central,  -- P(|T| ≤ t0)
            exp(lgamma((n + 1) / 2) - lgamma(n / 2) - 0.5 * ln(n * pi()) - (n + 1) / 2 * ln(1 + t0 * t0 / n)) AS density
        FROM (
            SELECT *, atan(t0 / sqrt(n)) AS th
            FROM (
                SELECT *, CASE
                    WHEN n = 1 THEN tan(pi() * (level - 0.5))
                    WHEN n = 2 THEN sqrt(2 / (big_p * (2 - big_p)) - 2)
                    WHEN y > 0.05 + a THEN sqrt(n * hill_normal(a, b, (((0.05 * d * x - 5) * x - 7) * x - 2) * x + b + c
                                                                  + CASE WHEN n < 5 THEN 0.3 * (n - 4.5) * (x + 0.6)
                                                                         ELSE 0 END, x))
                    ELSE sqrt(n * hill_small(y, n, d))
                END AS t0
                FROM (
                    SELECT *, (d * big_p) ^ (2 / n) AS y, normal_upper_tail_z(big_p / 2) AS x
                    FROM (
                        SELECT *, ((94.5 / (b + c) - 3) / b + 1) * sqrt(a * pi() / 2) * n AS d
                        FROM (
                            SELECT *, ((20700 * a / b - 98) * a - 16) * a + 96.36 AS c
                            FROM (
                                SELECT *, 2 * (1 - level) AS big_p, 1 / (n - 0.5) AS a, 48 * (n - 0.5) ^ 2 AS b
                                FROM (
                                    SELECT coalesce(p > 0.5 AND p < 1 AND dof >= 1, false) AS valid,
                                           CASE WHEN p > 0.5 AND p < 1 AND dof >= 1 THEN p ELSE 0.975 END AS level,
                                           CASE WHEN p > 0.5 AND p < 1 AND dof >= 1 THEN dof::BIGINT ELSE 1 END AS n
                                )
                            )
                        )
                    )
                )
            )
        )
    )
);

-- edge_settings: one row per edge-search space (space_settings.search's kind is 'edge'; NULL search, from a
-- file written before it was recorded, is not one), with the settings read from its search whatever fields it
-- has (the defaults of sweep/space/model.py where one is missing):
--   min_seeds (2), max_seeds (5), baseline_seeds (5), alpha (0.05): the space's search settings
--   looks = max_seeds − min_seeds + 1: the looks a config can have, one per seed count from min_seeds to max_seeds
--   alpha_per_look = alpha / looks (Bonferroni over the looks: a verdict keeps error ≤ alpha however many seeds
--   it got before stopping); t_level = 1 − alpha_per_look / 2 (two-sided)
--   futility: whether a config stops once even max_seeds could not give it a verdict (sweep/analysis/edge.py
--   futile; true by default; false for a record written before the setting existed: that search had none)
--   lr_arm: 'tuned' when the latest sweep recorded a learning-rate search (questions JSON has `tuning`), else
--   'untuned': the rows judged (a tuned sweep's verdict seeds, or an untuned sweep's)
CREATE OR REPLACE VIEW edge_settings AS
WITH parsed AS (
    SELECT s.space, s.metric, s.metric_mode, s.search,
           coalesce(TRY_CAST(s.search->>'min_seeds' AS BIGINT), 2) AS min_seeds,
           coalesce(TRY_CAST(s.search->>'max_seeds' AS BIGINT), 5) AS max_seeds,
           coalesce(TRY_CAST(s.search->>'baseline_seeds' AS BIGINT), 5) AS baseline_seeds,
           coalesce(TRY_CAST(s.search->>'alpha' AS DOUBLE), 0.05) AS alpha,
           coalesce(TRY_CAST(s.search->>'futility' AS BOOLEAN), false) AS futility,
           CASE WHEN json_extract(s.questions, '$.tuning') IS NOT NULL THEN 'tuned' ELSE 'untuned' END AS lr_arm
    FROM space_settings s
    WHERE s.search->>'kind' = 'edge'
)
SELECT space, metric, metric_mode, min_seeds, max_seeds, baseline_seeds, alpha, futility,
       max_seeds - min_seeds + 1 AS looks,
       alpha / (max_seeds - min_seeds + 1) AS alpha_per_look,
       1 - alpha / (max_seeds - min_seeds + 1) / 2 AS t_level,
       lr_arm, search
FROM parsed;

-- edge_lattice: one row per planned config of an edge-search space (spaces.search's `lattice`, written by the
-- sweep that planned it: sweep/results/sink.py search_json): config_id (the plan's: an untuned sweep's
-- config id; a tuned sweep's rows carry it as recipe_config_id), is_baseline, depth, the column's shape
-- (family, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads, conditioning) and column_key (the column's
-- whole shape as JSON text: every shape axis but depth, each declared question axis included).
CREATE OR REPLACE VIEW edge_lattice AS
WITH cells AS (
    SELECT e.space, e.metric, e.metric_mode, e.lr_arm, unnest(from_json(e.search->'lattice', '["JSON"]')) AS cell
    FROM edge_settings e
)
SELECT space, metric, metric_mode, lr_arm,
       cell->>'config_id' AS config_id,
       coalesce(TRY_CAST(cell->>'is_baseline' AS BOOLEAN), false) AS is_baseline,
       TRY_CAST(cell->>'depth' AS BIGINT) AS depth,
       cell->'column'->>'family' AS family,
       TRY_CAST(cell->'column'->>'num_heads' AS BIGINT) AS num_heads,
       TRY_CAST(cell->'column'->>'head_dim' AS BIGINT) AS head_dim,
       TRY_CAST(cell->'column'->>'embed_dim' AS BIGINT) AS embed_dim,
       TRY_CAST(cell->'column'->>'mlp_dim' AS BIGINT) AS mlp_dim,
       coalesce(TRY_CAST(cell->'column'->>'num_kv_heads' AS BIGINT),
                TRY_CAST(cell->'column'->>'num_heads' AS BIGINT)) AS num_kv_heads,
       coalesce(cell->'column'->>'conditioning', 'none') AS conditioning,
       (cell->'column')::VARCHAR AS column_key
FROM cells;

-- edge_state_words(verdict, n_seeds, n_trials, futile, needs_seeds): a measured state without a verdict, in
-- words (sweep/analysis/edge.py state_words says the same).
CREATE OR REPLACE MACRO edge_noise_words(needs_seeds) AS
    CASE WHEN needs_seeds IS NULL THEN 'noise: its gain sits on the tolerance'
         ELSE printf('noise: needs ~%d seeds a side', needs_seeds) END;
CREATE OR REPLACE MACRO edge_state_words(verdict, n_seeds, n_trials, futile, needs_seeds) AS CASE
    WHEN verdict = 'untried' THEN 'untried'
    WHEN verdict = 'failed' THEN printf('failed (all %d trials)', n_trials)
    WHEN verdict = 'inconclusive' AND futile THEN printf('inconclusive (%s; stopped at %d of %d trials finished: '
        || 'the cap could not settle it)', edge_noise_words(needs_seeds), n_seeds, n_trials)
    WHEN verdict = 'inconclusive' THEN printf('inconclusive at the cap (%d of %d trials finished; %s)', n_seeds,
        n_trials, edge_noise_words(needs_seeds))
    ELSE printf('open (%d of %d trials finished)', n_seeds, n_trials)
END;

-- edge_verdicts_at(tolerance): one row per (space, config) of an edge-search space's lattice (edge_lattice),
-- judged at the tolerance given (NULL: each space's own, as vs_baseline_at; space_tolerance_at). Columns:
--   n_trials: the config's seeds recorded, finished or failed (each (config, seed) once; its rows of the
--             space's arm, edge_settings.lr_arm, a tuned sweep's selection runs never; a row with status 'error'
--             never: the search runs such a seed again, as every resume does); n_seeds: those that finished
--             (status ok with a score: the latest such row of each seed); a failed seed (diverged, oom, pruned, or
--             ok without a score) counts toward the cap (max_seeds trials) but not toward n
--   score_mean: the mean over its finished seeds; baseline_score, baseline_seeds: the baseline's (same family)
--   delta = score_mean − baseline_score (the metric's units); gain = better · delta (positive is better)
--   pooled_sd, pooled_df: s_p² = Σ_i Σ_j (x_ij − x̄_i)² / Σ_i (n_i − 1) over every lattice config of the space
--             and family with ≥ 2 finished seeds, the baseline included; pooled_df = Σ_i (n_i − 1)
--   t_crit = t_quantile(1 − alpha/(2·looks), pooled_df) (edge_settings)
--   gain_lo, gain_hi = gain ∓ t_crit · s_p · √(1/n_c + 1/n_b): only when n_c ≥ min_seeds, n_b ≥ 2 and
--             pooled_df ≥ 1, never for the baseline (else NULL: no interval; gain is there once both sides have a
--             finished seed, 0 for the baseline)
--   verdict (measured): 'baseline' (the reference: a measured hold in its own column); 'untried' (no trial);
--             'failed' (min_seeds or more trials, every one failed: terminal, implies nothing); with an
--             interval 'holds' when
--             gain_lo ≥ −tolerance, 'breaks' when gain_hi < −tolerance; otherwise 'inconclusive' once the config
--             has max_seeds trials, or (edge_settings.futility) once futile; else 'open'
--   half_width_at_cap: the half-width the interval would have were every trial left to the config and the
--             baseline to finish: n_c' = max_seeds − the config's failed trials, n_b' = n_b + max(0, the
--             setting baseline_seeds − the baseline's trials), t_quantile(t_level, pooled_df + (n_c' − n_c) +
--             (n_b' − n_b)) · s_p · √(1/n_c' + 1/n_b'); futile: no verdict yet, fewer than max_seeds trials, and
--             |gain + tolerance| < half_width_at_cap (even the cap could not settle it if the gain stayed):
--             the search stops it, inconclusive; a stop without a verdict leaves every verdict's error ≤ alpha
--   needs_seeds (inconclusive configs with an interval): ⌈2 · (t_crit · s_p / |gain + tolerance|)²⌉, about the
--             seeds a side (config and baseline each) at which the interval would clear the tolerance if the gain
--             stayed (NULL when it sits on it)
--   contradiction: the config's column has a measured break deeper than a measured hold (the baseline's
--             column counts the baseline as a hold): depth is not monotone there, so the column implies nothing
--   implied ('holds' | 'breaks' | NULL), implied_from (the config_id it comes from), implied_from_depth: for a
--             config without a measured holds/breaks (open, inconclusive, failed or untried) in a column without
--             a contradiction: 'holds' when a shallower config of its column measured holds (the baseline
--             counts), from the nearest such; 'breaks' when a deeper one measured breaks, from the nearest;
--             none for a trained config whose own gain leans against it (below −tolerance for an implied hold,
--             at or above it for an implied break: edge.py leans_against).
--             An implied verdict is never a measurement: the config keeps its measured verdict beside it.
--   verdict_words: both in words, e.g. 'holds (measured)', 'holds (implied by depth 4, measured)',
--             'open (2 seeds); breaks (implied by depth 3, measured)'
CREATE OR REPLACE MACRO edge_verdicts_at(fixed_tolerance) AS TABLE
WITH arm_rows AS (
    SELECT t.*, coalesce(t.recipe_config_id, t.config_id) AS lattice_id
    FROM trials t JOIN edge_settings e ON t.space = e.space AND t.metric = e.metric
    WHERE t.tune_phase IS DISTINCT FROM 'selection'
      AND t.status IS DISTINCT FROM 'error'  -- an errored trial is run again (as a resume does): it counts nowhere
      AND CASE WHEN t.tune_phase = 'verdict' THEN 'tuned' ELSE 'untuned' END = e.lr_arm
),
finished_rows AS (  -- a seed finished more than once (run again) counts once, by its latest row (as configs)
    SELECT space, lattice_id, seed, score AS seed_score FROM arm_rows WHERE status = 'ok' AND score IS NOT NULL
    QUALIFY row_number() OVER (
        PARTITION BY space, lattice_id, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC) = 1
),
per_seed AS (
    SELECT s.space, s.lattice_id, s.seed, f.seed_score, f.seed_score IS NOT NULL AS finished
    FROM (SELECT DISTINCT space, lattice_id, seed FROM arm_rows) s LEFT JOIN finished_rows f USING (space, lattice_id, seed)
),
measured AS (
    SELECT space, lattice_id AS config_id,
           count(*) AS n_trials,
           count(*) FILTER (WHERE finished) AS n_seeds,
           avg(seed_score) AS score_mean,
           CASE WHEN count(seed_score) >= 2 THEN var_samp(seed_score) * (count(seed_score) - 1) END AS ss_within
    FROM per_seed GROUP BY space, lattice_id
),
cells AS (
    SELECT l.*, coalesce(m.n_trials, 0) AS n_trials, coalesce(m.n_seeds, 0) AS n_seeds, m.score_mean, m.ss_within
    FROM edge_lattice l LEFT JOIN measured m USING (space, config_id)
),
pool AS (
    SELECT space, family, sum(ss_within) / sum(n_seeds - 1) AS pooled_var, sum(n_seeds - 1)::BIGINT AS pooled_df
    FROM cells WHERE n_seeds >= 2 GROUP BY space, family
),
base AS (
    SELECT space, family, config_id AS baseline_id, score_mean AS baseline_score, n_seeds AS baseline_seeds,
           n_trials AS baseline_trials, depth AS baseline_depth, column_key AS baseline_column
    FROM cells WHERE is_baseline
),
judged AS (
    SELECT c.*, b.baseline_id, b.baseline_score, b.baseline_seeds, sqrt(p.pooled_var) AS pooled_sd, p.pooled_df,
           e.min_seeds, e.max_seeds, e.alpha, e.looks, e.futility, tol.tol, e.t_level,
           e.max_seeds - (c.n_trials - c.n_seeds) AS n_c_cap,  -- the most finished seeds its cap allows
           coalesce(b.baseline_seeds, 0) + greatest(0, e.baseline_seeds - coalesce(b.baseline_trials, 0)) AS n_b_cap,
           better_sign(c.metric_mode) AS better,
           c.score_mean - b.baseline_score AS delta,
           t_quantile(e.t_level, p.pooled_df) AS t_crit,
           NOT c.is_baseline AND c.n_seeds >= e.min_seeds AND coalesce(b.baseline_seeds, 0) >= 2
               AND coalesce(p.pooled_df, 0) >= 1 AS has_interval  -- the baseline: gain 0, the reference
    FROM cells c
    JOIN edge_settings e USING (space, metric)
    JOIN (SELECT DISTINCT space, metric, tol FROM space_tolerance_at(fixed_tolerance)) tol USING (space, metric)
    LEFT JOIN base b USING (space, family)
    LEFT JOIN pool p USING (space, family)
),
intervals AS (
    SELECT *,
        better * delta AS gain,  -- NULL unless both sides have a finished seed
        CASE WHEN has_interval THEN better * delta - t_crit * pooled_sd * sqrt(1.0 / n_seeds + 1.0 / baseline_seeds)
        END AS gain_lo,
        CASE WHEN has_interval THEN better * delta + t_crit * pooled_sd * sqrt(1.0 / n_seeds + 1.0 / baseline_seeds)
        END AS gain_hi,
        CASE WHEN has_interval AND n_trials < max_seeds THEN
            t_quantile(t_level, pooled_df + (n_c_cap - n_seeds) + (n_b_cap - baseline_seeds)) * pooled_sd
                * sqrt(1.0 / n_c_cap + 1.0 / n_b_cap)
        END AS half_width_at_cap
    FROM judged
),
verdicts AS (
    SELECT *,
        CASE
            WHEN is_baseline THEN 'baseline'
            WHEN n_trials = 0 THEN 'untried'
            WHEN n_seeds = 0 AND n_trials >= min_seeds THEN 'failed'
            WHEN has_interval AND gain_lo >= -tol THEN 'holds'
            WHEN has_interval AND gain_hi < -tol THEN 'breaks'
            WHEN n_trials >= max_seeds THEN 'inconclusive'
            WHEN futile THEN 'inconclusive'
            ELSE 'open'
        END AS verdict
    FROM (SELECT *, coalesce(futility AND has_interval AND n_trials < max_seeds AND gain_lo < -tol
                             AND gain_hi >= -tol AND abs(gain + tol) < half_width_at_cap, false) AS futile
          FROM intervals)
),
col_stats AS (
    SELECT space, column_key,
           min(depth) FILTER (WHERE verdict IN ('holds', 'baseline')) AS shallowest_hold,
           max(depth) FILTER (WHERE verdict = 'breaks') AS deepest_break
    FROM verdicts GROUP BY space, column_key
),
nearest AS (
    SELECT v.*, coalesce(c.deepest_break > c.shallowest_hold, false) AS contradiction,
        arg_max(config_id, CASE WHEN verdict IN ('holds', 'baseline') THEN depth END) OVER (
            PARTITION BY space, column_key ORDER BY depth ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS hold_below_id,
        max(CASE WHEN verdict IN ('holds', 'baseline') THEN depth END) OVER (
            PARTITION BY space, column_key ORDER BY depth ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS hold_below_depth,
        arg_min(config_id, CASE WHEN verdict = 'breaks' THEN depth END) OVER (
            PARTITION BY space, column_key ORDER BY depth ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
        ) AS break_above_id,
        min(CASE WHEN verdict = 'breaks' THEN depth END) OVER (
            PARTITION BY space, column_key ORDER BY depth ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
        ) AS break_above_depth
    FROM verdicts v JOIN col_stats c USING (space, column_key)
),
implied AS (
    SELECT *,
        CASE WHEN verdict IN ('holds', 'breaks', 'baseline') OR contradiction THEN NULL
             WHEN hold_below_id IS NOT NULL THEN CASE WHEN gain IS NULL OR gain >= -tol THEN 'holds' END
             WHEN break_above_id IS NOT NULL THEN CASE WHEN gain IS NULL OR gain < -tol THEN 'breaks' END
        END AS implied
    FROM nearest
)
SELECT space, config_id, family, depth, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads, conditioning,
       column_key, is_baseline, lr_arm, metric, metric_mode, n_seeds, n_trials, score_mean,
       baseline_id, baseline_score, baseline_seeds, delta, gain, gain_lo, gain_hi, pooled_sd, pooled_df, t_crit,
       tol AS tolerance, min_seeds, max_seeds, alpha, looks, half_width_at_cap, futile,
       CASE WHEN verdict = 'inconclusive' AND has_interval AND gain <> -tol
            THEN ceil(2 * (t_crit * pooled_sd / abs(gain + tol)) ^ 2)::BIGINT END AS needs_seeds,
       verdict, implied,
       CASE implied WHEN 'holds' THEN hold_below_id WHEN 'breaks' THEN break_above_id END AS implied_from,
       CASE implied WHEN 'holds' THEN hold_below_depth WHEN 'breaks' THEN break_above_depth END AS implied_from_depth,
       contradiction,
       CASE
           WHEN verdict = 'baseline' THEN 'baseline (the reference: a measured hold in its column)'
           WHEN verdict IN ('holds', 'breaks') THEN verdict || ' (measured)'
           WHEN implied IS NULL THEN edge_state_words(verdict, n_seeds, n_trials, futile, needs_seeds)
           WHEN verdict = 'untried' THEN implied || ' (implied by depth '
               || CASE implied WHEN 'holds' THEN hold_below_depth ELSE break_above_depth END || ', measured)'
           ELSE edge_state_words(verdict, n_seeds, n_trials, futile, needs_seeds) || '; ' || implied || ' (implied by depth '
               || CASE implied WHEN 'holds' THEN hold_below_depth ELSE break_above_depth END || ', measured)'
       END AS verdict_words
FROM implied;

CREATE OR REPLACE VIEW edge_verdicts AS
FROM edge_verdicts_at(getvariable('tolerance'));

-- edge_columns_at(tolerance), edge_columns: one row per column of an edge-search space (edge_verdicts_at), in
-- the words the search prints (sweep/analysis/edge.py: column_words, contradiction, column_edge):
--   column_words: the column's axes that vary across the space's lattice, 'num_heads=16, head_dim=4' (with
--                 embed_dim, mlp_dim, kv_heads where grouped-query attention is swept, and conditioning, where each
--                 varies)
--   depths, verdicts, implied: the column's depths ascending, each one's measured verdict and implied one
--   holds_from_depth: the shallowest depth measured to hold (the baseline counts); breaks_at_depth: the deepest
--                 measured to break (NULL when none, and both NULL in a column with a contradiction)
--   found: the edge is bracketed by measurements: holds_from_depth and breaks_at_depth adjacent in the
--                 column's depths; or 'holds throughout' (the shallowest depth measured holds); or 'breaks
--                 throughout' (the deepest measured breaks); never with a contradiction
--   contradiction: a measured break deeper than a measured hold; contradiction_words: the one line that says it,
--                 the deepest break against the deepest hold shallower than it, each with its gain ± the interval's
--                 half-width and its seeds ('the baseline' for the baseline)
--   description: the edge in words, or why it is not found ('depth is not monotone in this column'; the
--                 inconclusive or failed configs in the bracket; else 'still measuring')
CREATE OR REPLACE MACRO edge_interval_words(verdict, gain, gain_lo, gain_hi, n_seeds) AS CASE
    WHEN verdict = 'baseline' THEN 'the baseline'
    WHEN gain_lo IS NULL THEN n_seeds || ' seeds'
    ELSE printf('gain %s ± %s, %d seeds', printf('%+.3g', gain), printf('%.3g', (gain_hi - gain_lo) / 2), n_seeds)
END;

CREATE OR REPLACE MACRO edge_columns_at(fixed_tolerance) AS TABLE
WITH cells AS (
    SELECT *, edge_interval_words(verdict, gain, gain_lo, gain_hi, n_seeds) AS interval_words
    FROM edge_verdicts_at(fixed_tolerance)
),
spread AS (  -- which axes vary across the space's lattice: only those name a column
    SELECT space, count(DISTINCT num_heads) > 1 AS by_heads, count(DISTINCT head_dim) > 1 AS by_head_dim,
           count(DISTINCT embed_dim) > 1 AS by_width, count(DISTINCT mlp_dim) > 1 AS by_mlp,
           bool_or(num_kv_heads <> num_heads) AND count(DISTINCT num_kv_heads) > 1 AS by_kv,
           count(DISTINCT conditioning) > 1 AS by_conditioning
    FROM cells GROUP BY space
),
col_stats AS (
    SELECT space, column_key, any_value(family) AS family, any_value(num_heads) AS num_heads,
           any_value(head_dim) AS head_dim, any_value(embed_dim) AS embed_dim, any_value(mlp_dim) AS mlp_dim,
           any_value(num_kv_heads) AS num_kv_heads, any_value(conditioning) AS conditioning, any_value(metric) AS metric,
           bool_or(contradiction) AS contradiction,
           list(depth ORDER BY depth) AS depths,
           list(verdict ORDER BY depth) AS verdicts,
           list(implied ORDER BY depth) AS implied,
           min(depth) AS shallowest, max(depth) AS deepest,
           min(depth) FILTER (WHERE verdict IN ('holds', 'baseline')) AS hold_from,
           max(depth) FILTER (WHERE verdict = 'breaks') AS break_at
    FROM cells GROUP BY space, column_key
),
brackets AS (
    SELECT c.*,
           (SELECT count(*) FROM cells x WHERE x.space = c.space AND x.column_key = c.column_key
                AND x.depth > c.break_at AND x.depth < c.hold_from) AS between_count,
           (SELECT string_agg('depth ' || x.depth || ' ' || x.verdict, '; ' ORDER BY x.depth)
            FROM cells x WHERE x.space = c.space AND x.column_key = c.column_key
                AND x.depth > coalesce(c.break_at, c.shallowest - 1) AND x.depth < coalesce(c.hold_from, c.deepest + 1)
                AND x.verdict IN ('inconclusive', 'failed')) AS stuck_words,
           (SELECT printf('depth %d breaks (%s)', x.depth, x.interval_words)
            FROM cells x WHERE x.space = c.space AND x.column_key = c.column_key AND x.depth = c.break_at
            LIMIT 1) AS break_words,
           (SELECT printf('depth %d holds (%s)', arg_max(x.depth, x.depth), arg_max(x.interval_words, x.depth))
            FROM cells x WHERE x.space = c.space AND x.column_key = c.column_key AND x.depth < c.break_at
                AND x.verdict IN ('holds', 'baseline')) AS hold_words,
           concat_ws(', ',
               CASE WHEN s.by_heads THEN 'num_heads=' || c.num_heads END,
               CASE WHEN s.by_head_dim THEN 'head_dim=' || c.head_dim END,
               CASE WHEN s.by_width THEN 'embed_dim=' || c.embed_dim END,
               CASE WHEN s.by_mlp THEN 'mlp_dim=' || c.mlp_dim END,
               CASE WHEN s.by_kv THEN 'kv_heads=' || c.num_kv_heads END,
               CASE WHEN s.by_conditioning THEN 'conditioning=' || c.conditioning END) AS column_words
    FROM col_stats c JOIN spread s USING (space)
),
found AS (
    SELECT *,
        coalesce(NOT contradiction AND (
            hold_from = shallowest
            OR break_at = deepest
            OR (break_at < hold_from AND between_count = 0)
        ), false) AS found
    FROM brackets
)
SELECT space, metric, family, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads, conditioning, column_key,
       column_words, depths, verdicts, implied,
       CASE WHEN NOT contradiction THEN break_at END AS breaks_at_depth,
       CASE WHEN NOT contradiction THEN hold_from END AS holds_from_depth,
       found, contradiction,
       CASE WHEN contradiction THEN
           printf('edge search: column %s: %s but %s: depth is not monotone here; measuring the whole column',
                  column_words, break_words, hold_words)
       END AS contradiction_words,
       CASE
           WHEN contradiction THEN 'not found: depth is not monotone in this column'
           WHEN hold_from = shallowest THEN printf('holds throughout (measured at depth %d)', hold_from)
           WHEN break_at = deepest THEN printf('breaks throughout (measured at depth %d)', break_at)
           WHEN found THEN printf('breaks at depth %d, holds from depth %d', break_at, hold_from)
           ELSE 'not found: ' || coalesce(stuck_words, 'still measuring')
       END AS description
FROM found
ORDER BY space, family, embed_dim, mlp_dim, num_heads, head_dim, num_kv_heads DESC, conditioning;

CREATE OR REPLACE VIEW edge_columns AS
FROM edge_columns_at(getvariable('tolerance'));
