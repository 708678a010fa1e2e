-- Analysis views over the results tables. Schema version 2; version-1 files are read too.
--
-- Works in two places:
--   sweep sql "FROM depth_edge"              (the tool creates the tables' globs over --results first)
--   sweep sql --print-views > views.sql; duckdb -init views.sql
--                                            (plain DuckDB shell, run from the folder that holds results/)
--
-- The definitions are files loaded in this order (sweep/analysis/sql.py): sweep/analysis/views/compat.sql (the tables, every
-- schema version read as the latest), macros.sql (statistics), core.sql (the core views), then each question's
-- file beside its module (sweep/questions/*.sql, in the registry's order).
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
CREATE OR REPLACE VIEW trials_files AS FROM read_parquet('results/trials/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW epochs_files AS FROM read_parquet('results/epochs/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW kappa AS FROM read_parquet('results/kappa/**/*.parquet', union_by_name = true);
CREATE OR REPLACE VIEW spaces_files AS FROM read_parquet('results/spaces/**/*.parquet', union_by_name = true);
-- @base-tables-end

-- trials, epochs, spaces: the rows of every schema version, read as version 2. A version-1 trials row has
-- no metric, metric_mode or score (nor the sequence columns): its metric is top1, higher is better, and
-- its score is its top1. A row from before grouped-query attention and conditioning interventions has
-- num_kv_heads = num_heads (multi-head attention) and conditioning 'none' (the model as built); one from
-- before budget blocks (or outside one) has budget_way and budget_target_params NULL, and one from before
-- control arms has control NULL (not a control), as every grid config's row; one from before chance levels were
-- recorded has chance_score NULL (nothing is flagged as at chance). A version-1 epochs row's
-- val_score is its val_top1. A version-1 spaces row has tolerance_top1 (points of top-1) instead of metric,
-- metric_mode and tolerance. The empty, typed selects
-- supply the columns that a folder holding only version-1 files lacks.
CREATE OR REPLACE VIEW trials AS
SELECT * REPLACE (
    coalesce(metric, 'top1') AS metric,
    coalesce(metric_mode, 'max') AS metric_mode,
    CASE WHEN metric IS NULL THEN top1 ELSE score END AS score,
    coalesce(num_kv_heads, num_heads) AS num_kv_heads,
    coalesce(conditioning, 'none') AS conditioning)
FROM (
    FROM trials_files
    UNION ALL BY NAME
    SELECT NULL::VARCHAR AS metric, NULL::VARCHAR AS metric_mode, NULL::DOUBLE AS score, NULL::DOUBLE AS accuracy,
           NULL::DOUBLE AS train_tokens_per_s, NULL::DOUBLE AS infer_tokens_per_s, NULL::BIGINT AS seq_len,
           NULL::BIGINT AS num_kv_heads, NULL::VARCHAR AS conditioning, NULL::BIGINT AS kv_cache_bytes_per_token,
           NULL::DOUBLE AS token_latency_ms, NULL::VARCHAR AS budget_way, NULL::BIGINT AS budget_target_params,
           NULL::VARCHAR AS control, NULL::DOUBLE AS chance_score
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

-- Statistics macros every view uses (sweep/analysis/views/compat.sql's header says how the files fit).

-- Two-sided 95% Student t critical value for `dof` degrees of freedom (any real dof ≥ 1; NULL below 1).
--   whole dof 1 … 30: the exact value (scipy.stats.t.ppf(0.975, dof), 4 decimals), from the list below;
--   fractional dof below 30 (Welch): ln t interpolated linearly in 1/dof between the whole dof either side.
--       That is never below the exact value and at most 2.9% above it (dof 1–2), 0.5% above from dof 2 on:
--       a slightly wide interval, never a narrow one. (Rounding dof down, as before, was up to 2× too wide
--       between dof 1 and 2, and made 2-seed intervals cover 99%, not 95%.)
--   dof ≥ 30 (pooled variances, many seeds): the Cornish–Fisher expansion of the t quantile about the
--       normal's z = 1.959964 to the 1/dof⁴ term (Abramowitz & Stegun 26.7.5), within 1e-7 of exact.
CREATE OR REPLACE MACRO t95_whole(i) AS
    [12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788, 2.1604,
     2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555,
     2.0518, 2.0484, 2.0452, 2.0423][i];

CREATE OR REPLACE MACRO t95(dof) AS CASE
    WHEN dof IS NULL OR dof < 1 THEN NULL
    WHEN dof >= 30 THEN 1.959963984540054 + 2.372271230298562 / dof + 2.822498615739611 / dof ^ 2
                        + 2.555849679507722 / dof ^ 3 + 1.589534053393823 / dof ^ 4
    WHEN dof = floor(dof) THEN t95_whole(floor(dof)::INTEGER)
    ELSE exp(ln(t95_whole(floor(dof)::INTEGER))
             + (1 / floor(dof) - 1 / dof) / (1 / floor(dof) - 1 / (floor(dof) + 1))
               * (ln(t95_whole(floor(dof)::INTEGER + 1)) - ln(t95_whole(floor(dof)::INTEGER))))
END;

-- welch_df(sd_a, n_a, sd_b, n_b): the Welch–Satterthwaite degrees of freedom of a difference of two means
-- (sample sd and seed count of each side): (va + vb)² / (va² / (n_a − 1) + vb² / (n_b − 1)) with
-- va = sd_a² / n_a, vb = sd_b² / n_b. NULL unless both sides have ≥ 2 seeds; n_a + n_b − 2 when both
-- sides have no spread at all.
CREATE OR REPLACE MACRO welch_df(sd_a, n_a, sd_b, n_b) AS CASE
    WHEN n_a >= 2 AND n_b >= 2 AND sd_a ^ 2 / n_a + sd_b ^ 2 / n_b > 0 THEN
        (sd_a ^ 2 / n_a + sd_b ^ 2 / n_b) ^ 2
            / ((sd_a ^ 2 / n_a) ^ 2 / (n_a - 1) + (sd_b ^ 2 / n_b) ^ 2 / (n_b - 1))
    WHEN n_a >= 2 AND n_b >= 2 THEN n_a + n_b - 2
END;

-- rival_verdict(has_interval, gain, gain_lo, gain_hi, tol): a config against a rival (matched_budget_at,
-- budget_pairs_at, mlp_control_at), on `gain`, the difference signed so that positive is better, and its
-- 95% interval gain_lo … gain_hi, at tolerance `tol` (the metric's units):
--   'wins'                   gain_lo > +tol   (confidently better by more than the tolerance)
--   'loses'                  gain_hi < −tol   (confidently worse by more than it)
--   'tie (within tolerance)' −tol ≤ gain_lo and gain_hi ≤ +tol
--   'inconclusive'           otherwise
-- Without an interval (has_interval FALSE: one seed on a side) on the gain alone: gain > +tol wins,
-- gain < −tol loses, else tie (within tolerance); such a verdict is never significant.
CREATE OR REPLACE MACRO rival_verdict(has_interval, gain, gain_lo, gain_hi, tol) AS CASE
    WHEN NOT has_interval THEN CASE WHEN gain > tol THEN 'wins' WHEN gain < -tol THEN 'loses'
                                    ELSE 'tie (within tolerance)' END
    WHEN gain_lo > tol THEN 'wins'
    WHEN gain_hi < -tol THEN 'loses'
    WHEN gain_lo >= -tol AND gain_hi <= tol THEN 'tie (within tolerance)'
    ELSE 'inconclusive'
END;

-- f95(d1, d2): the upper 5% point of Snedecor's F with d1 and d2 degrees of freedom (one-sided, 95%).
--   d1 = 1: exact, as t95(d2)², since F(1, d2) = t(d2)²
--   d1 ≥ 2: Paulson's normal approximation to F^(1/3) (Abramowitz & Stegun 26.6.15) solved for the
--           quantile: with a = 2/(9 d1), b = 2/(9 d2), z = 1.644854,
--           F = [((1−a)(1−b) + √((1−a)²(1−b)² − ((1−b)² − z²b)((1−a)² − z²a))) / ((1−b)² − z²b)]³;
--           within 2.5% of exact from d2 = 5 on, up to 7% high at d2 = 3 and 4 (a bound too high rejects
--           less). NULL for d2 < 3 (there the approximation is 26% high or worse): no usable bound.
CREATE OR REPLACE MACRO paulson_f95(a, b) AS CASE WHEN (1 - b) ^ 2 - 2.705543454095404 * b > 0 THEN
    (((1 - a) * (1 - b) + sqrt(greatest(0, ((1 - a) * (1 - b)) ^ 2
        - ((1 - b) ^ 2 - 2.705543454095404 * b) * ((1 - a) ^ 2 - 2.705543454095404 * a))))
     / ((1 - b) ^ 2 - 2.705543454095404 * b)) ^ 3
END;

CREATE OR REPLACE MACRO f95(d1, d2) AS CASE
    WHEN d1 IS NULL OR d2 IS NULL OR d1 < 1 OR d2 < 1 THEN NULL
    WHEN d1 = 1 THEN t95(d2) ^ 2
    WHEN d2 < 3 THEN NULL
    ELSE paulson_f95(2.0 / (9 * d1), 2.0 / (9 * d2))
END;

-- erfc_approx(x), x ≥ 0: the complementary error function, Abramowitz & Stegun 7.1.26 (absolute error
-- below 1.5e-7). DuckDB has no erf; this is for p-values, where that is plenty.
CREATE OR REPLACE MACRO erfc_approx(x) AS
    (1 / (1 + 0.3275911 * x)) * (0.254829592 + (1 / (1 + 0.3275911 * x)) * (-0.284496736
        + (1 / (1 + 0.3275911 * x)) * (1.421413741 + (1 / (1 + 0.3275911 * x)) * (-1.453152027
        + (1 / (1 + 0.3275911 * x)) * 1.061405429)))) * exp(-x * x);

-- chi2_sf(x, dof): P(χ²_dof > x) for a whole number of degrees of freedom, by the closed forms
--   dof even: exp(−x/2) · Σ_{j=0}^{dof/2−1} (x/2)^j / j!
--   dof odd:  erfc(√(x/2)) + exp(−x/2) · Σ_{j=1}^{(dof−1)/2} (x/2)^(j−½) / Γ(j+½)
-- (each term taken as one exp of logs, so many degrees of freedom neither overflow nor underflow; the
-- greatest() only keeps ln away from 0 where the CASE answers 1 anyway: DuckDB evaluates subqueries for
-- every row).
CREATE OR REPLACE MACRO chi2_sf(x, dof) AS CASE
    WHEN x IS NULL OR dof IS NULL OR dof < 1 THEN NULL
    WHEN x <= 0 THEN 1.0
    WHEN dof % 2 = 0 THEN
        (SELECT sum(exp(-x / 2 + j * ln(greatest(x, 1e-300) / 2) - lgamma(j + 1))) FROM range(0, dof // 2) AS terms(j))
    ELSE erfc_approx(sqrt(x / 2))
         + coalesce((SELECT sum(exp(-x / 2 + (j - 0.5) * ln(greatest(x, 1e-300) / 2) - lgamma(j + 0.5)))
                     FROM range(1, (dof + 1) // 2) AS terms(j)), 0)
END;

-- mix32(x): Wellons' "lowbias32" hash of a whole number 0 ≤ x < 2³², to 0 … 2³² − 1:
--   x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16   (products mod 2³²)
-- The random source of the bootstraps here: written out, so every DuckDB version (and a test in Python)
-- draws the same resamples, where DuckDB's own hash() may change between versions.
CREATE OR REPLACE MACRO mix32_step(x, shift, factor) AS (xor(x, x >> shift) * factor) % 4294967296;
CREATE OR REPLACE MACRO mix32(x) AS
    xor(mix32_step(mix32_step(x::UBIGINT, 16, 2146121005::UBIGINT), 15, 2221713035::UBIGINT),
        mix32_step(mix32_step(x::UBIGINT, 16, 2146121005::UBIGINT), 15, 2221713035::UBIGINT) >> 16);

-- learned_share(score, chance, mode): how far a score got from chance toward a perfect score, 0 at chance and
-- 1 at perfect: (score − chance) / (100 − chance) for a max metric (every max headline metric is in percent
-- or points: top1, accuracy, glue_avg), (chance − score) / chance for a min one (a loss of 0 is perfect).
-- chance is trials.chance_score, the data set's level for that metric (workers/data: chance_score; 10% on
-- 10 classes, ln(classes) nats, 50% for MQAR with 2 pairs). NULL when either is unknown.
-- at_chance(score, chance, mode): TRUE when the score got less than 15% of that way: the model learned
-- nothing usable. (MQAR with 2 pairs: below 57.5% where a model with the recall circuit reaches 99%; digits
-- at 10 classes: below 23.5%.) NULL when the chance level is unknown: nothing is flagged then.
CREATE OR REPLACE MACRO learned_share(score, chance, mode) AS CASE
    WHEN score IS NULL OR chance IS NULL THEN NULL
    WHEN mode = 'min' THEN CASE WHEN chance > 0 THEN (chance - score) / chance END
    ELSE CASE WHEN chance < 100 THEN (score - chance) / (100 - chance) END
END;
CREATE OR REPLACE MACRO at_chance(score, chance, mode) AS learned_share(score, chance, mode) < 0.15;

-- better_sign(mode): +1 when higher is better (metric_mode max, or unknown), −1 when lower is (min).
-- signed_lo(better, lo, hi), signed_hi(better, lo, hi): the ends of an interval lo … hi of a difference,
-- signed by `better` so that positive is better: (lo, hi) for max, (−hi, −lo) for min. With `better *
-- delta` as the gain, every comparison below (vs_baseline_at, matched_budget_at, budget_pairs_at,
-- conditioning_effect, mlp_control_at) turns a difference into gain, gain_lo, gain_hi by these.
CREATE OR REPLACE MACRO better_sign(mode) AS CASE WHEN mode = 'min' THEN -1 ELSE 1 END;
CREATE OR REPLACE MACRO signed_lo(better, lo, hi) AS CASE WHEN better = 1 THEN lo ELSE -hi END;
CREATE OR REPLACE MACRO signed_hi(better, lo, hi) AS CASE WHEN better = 1 THEN hi ELSE -lo END;

-- pair_evidence(has_interval): 'welch t, 95%' when both sides have ≥ 2 seeds, else 'single seed'.
CREATE OR REPLACE MACRO pair_evidence(has_interval) AS CASE WHEN has_interval THEN 'welch t, 95%' ELSE 'single seed' END;

-- The core analysis views: every config against its baseline, the edges, the Pareto front, matched
-- budgets, κ (sweep/analysis/views/compat.sql's header says how the files fit).

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
-- train_s_per_sample: the mean over finished seeds of 1 / train_samples_per_s (seconds per training sample).
-- A seed that finished more than once (the same config and seed run again, e.g. with --fresh) counts once,
-- by its latest row (finished_at, then trial_id), so n_seeds and every mean and sd describe the same seeds;
-- rows that did not finish are all counted in n_failed.
-- chance_score: the data set's chance level for the metric (trials.chance_score); at_chance: the mean score
-- is at chance (at_chance above: the config did not learn); n_at_chance: finished seeds each at chance;
-- n_unlearned: seeds at chance while another seed of the same config learned (0 when none learned): seeds
-- that failed where their siblings did not, each listed in unlearned_seeds.
CREATE OR REPLACE VIEW configs AS
WITH one_row_per_seed AS (
    SELECT * FROM trials WHERE status = 'ok'
    QUALIFY row_number() OVER (
        PARTITION BY space, config_id, metric, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC
    ) = 1
    UNION ALL BY NAME
    SELECT * FROM trials WHERE status IS DISTINCT FROM 'ok'
)
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
    any_value(num_kv_heads) AS num_kv_heads,
    any_value(conditioning) AS conditioning,
    any_value(budget_way) AS budget_way,
    any_value(budget_target_params) AS budget_target_params,
    bool_or(is_baseline) AS is_baseline,
    max(control) AS control,  -- the control arm's label (the space's `controls:`), NULL for the grid's configs
    count(DISTINCT seed) FILTER (WHERE status = 'ok') AS n_seeds,
    count(*) FILTER (WHERE status <> 'ok') AS n_failed,
    avg(score) FILTER (WHERE status = 'ok') AS score_mean,
    max(chance_score) AS chance_score,
    coalesce(at_chance(avg(score) FILTER (WHERE status = 'ok'), max(chance_score), any_value(metric_mode)), false)
        AS at_chance,
    count(*) FILTER (WHERE status = 'ok' AND at_chance(score, chance_score, metric_mode)) AS n_at_chance,
    CASE WHEN count(*) FILTER (WHERE status = 'ok' AND NOT at_chance(score, chance_score, metric_mode)) > 0
         THEN count(*) FILTER (WHERE status = 'ok' AND at_chance(score, chance_score, metric_mode)) ELSE 0
    END AS n_unlearned,
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
    max(kappa_max) FILTER (WHERE status = 'ok') AS kappa_max,
    -- the log of κ averaged over seeds (conditioning_effect compares it), and its sample sd
    avg(ln(kappa_mean)) FILTER (WHERE status = 'ok' AND kappa_mean > 0) AS log_kappa_mean,
    stddev_samp(ln(kappa_mean)) FILTER (WHERE status = 'ok' AND kappa_mean > 0) AS log_kappa_sd,
    count(kappa_mean) FILTER (WHERE status = 'ok' AND kappa_mean > 0) AS n_kappa,
    max(kv_cache_bytes_per_token) AS kv_cache_bytes_per_token,
    avg(token_latency_ms) FILTER (WHERE status = 'ok') AS token_latency_ms,
    -- seconds of training per sample: 1 / train_samples_per_s of each finished seed, averaged over them
    avg(1.0 / train_samples_per_s) FILTER (WHERE status = 'ok' AND train_samples_per_s > 0) AS train_s_per_sample
FROM one_row_per_seed
GROUP BY space, config_id, metric;

-- unlearned_seeds: a seed that failed to learn while its siblings did. One row per finished seed (its latest
-- row, as in configs) whose score is at chance (at_chance above) in a config where at least one other
-- seed is not: the config CAN learn at this budget, and this seed did not (an optimisation failure, not
-- the shape's limit). Such a seed stays in every mean and interval (dropping it would hide the failure
-- rate); it widens its config's interval, and the report names it. Columns: the config's shape, seed,
-- trial_id, score, chance_score, siblings_learned (seeds of the config that learned) and siblings_mean
-- (their mean score).
CREATE OR REPLACE VIEW unlearned_seeds AS
WITH seeds AS (
    SELECT *, coalesce(at_chance(score, chance_score, metric_mode), false) AS stuck
    FROM trials WHERE status = 'ok'
    QUALIFY row_number() OVER (
        PARTITION BY space, config_id, metric, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC
    ) = 1
),
learned AS (
    SELECT space, config_id, metric, count(*) AS siblings_learned, avg(score) AS siblings_mean
    FROM seeds WHERE NOT stuck GROUP BY ALL
)
SELECT s.space, s.metric, s.metric_mode, s.family, s.config_id, s.is_baseline, s.depth, s.num_heads, s.head_dim,
       s.embed_dim, s.mlp_dim, s.num_kv_heads, s.conditioning, s.seed, s.trial_id, s.score, s.chance_score,
       l.siblings_learned, l.siblings_mean
FROM seeds s JOIN learned l USING (space, config_id, metric)
WHERE s.stuck
ORDER BY s.space, s.family, s.depth, s.num_heads, s.head_dim, s.seed;

-- variance_check: may the configs of a space (per headline metric and model family) share one residual
-- variance? The pooled method below assumes they do; this view checks it in the data.
--   configs_pooled: configs with ≥ 2 finished seeds (k); only they carry a within-config variance
--   pooled_df:      Σ (n_i − 1) over those configs (n_i: finished seeds of config i)
--   pooled_sd:      s_p = √( Σ (n_i − 1) s_i² / pooled_df ), s_i the config's sample sd of the score
--   variance_ratio: the largest s_i² over the smallest (a reading aid; with 2 seeds it swings widely)
--   bartlett_stat:  Bartlett's test of equal variances, [pooled_df · ln s_p² − Σ (n_i − 1) ln s_i²] / C with
--                   C = 1 + (Σ 1 / (n_i − 1) − 1 / pooled_df) / (3 (k − 1)), on bartlett_df = k − 1 degrees of
--                   freedom; bartlett_p = P(χ²_{k−1} > bartlett_stat) (as scipy.stats.bartlett)
--   equal_variance: the rule: TRUE when bartlett_p ≥ 0.05 (equal variances not rejected at 5%); FALSE when
--                   bartlett_p < 0.05, or when some config's seeds all scored the same (s_i = 0: Bartlett's
--                   statistic is infinite, the data say nothing reassuring); NULL when k < 2 (nothing to
--                   compare). Only TRUE lets a verdict pool (see vs_baseline_at); `note` says which case.
-- Bartlett's test assumes normal noise; it rejects more often than 5% when the noise has heavy tails, and
-- then verdicts fall back to Welch: the cautious direction. With 2 seeds per config it is conservative
-- (rejects ~3% of equal-variance draws at 12 configs) and has little power against mild differences.
CREATE OR REPLACE VIEW variance_check AS
WITH pool AS (
    SELECT space, metric, family,
           count(*) AS configs_pooled,
           sum(n_seeds - 1)::BIGINT AS pooled_df,
           sum((n_seeds - 1) * score_sd ^ 2) / sum(n_seeds - 1) AS pooled_var,
           sum((n_seeds - 1) * ln(CASE WHEN score_sd > 0 THEN score_sd ^ 2 END)) AS df_log_var,
           sum(1.0 / (n_seeds - 1)) AS inverse_df,
           min(score_sd ^ 2) AS var_min,
           max(score_sd ^ 2) AS var_max
    FROM configs
    WHERE n_seeds >= 2 AND score_sd IS NOT NULL
    GROUP BY space, metric, family
),
tested AS (
    SELECT *,
        CASE WHEN configs_pooled >= 2 AND var_min > 0 THEN
            (pooled_df * ln(pooled_var) - df_log_var)
                / (1 + (inverse_df - 1.0 / pooled_df) / (3 * (configs_pooled - 1)))
        END AS bartlett_stat
    FROM pool
),
judged AS (
    SELECT *,
        chi2_sf(bartlett_stat, configs_pooled - 1) AS bartlett_p,
        CASE WHEN configs_pooled < 2 THEN NULL
             WHEN var_min = 0 THEN false
             ELSE chi2_sf(bartlett_stat, configs_pooled - 1) >= 0.05
        END AS equal_variance
    FROM tested
)
SELECT space, metric, family, configs_pooled, pooled_df, sqrt(pooled_var) AS pooled_sd,
       CASE WHEN var_min > 0 THEN var_max / var_min END AS variance_ratio,
       bartlett_stat, CASE WHEN configs_pooled >= 2 THEN configs_pooled - 1 END AS bartlett_df, bartlett_p,
       equal_variance,
       CASE
           WHEN configs_pooled < 2 THEN
               'equal variances cannot be checked (fewer than 2 configs with 2+ seeds): Welch, not pooled'
           WHEN var_min = 0 THEN
               'equal variances cannot be checked (a config''s seeds all scored the same): Welch, not pooled'
           WHEN equal_variance THEN
               printf('equal variances not rejected (Bartlett p=%.3g over %d configs): pooled',
                      bartlett_p, configs_pooled)
           ELSE printf('variances differ across configs (Bartlett p=%.3g < 0.05 over %d configs): Welch, not pooled',
                       bartlett_p, configs_pooled)
       END AS note
FROM judged;

-- spread_check: is each config's own spread in line with the other configs of its pool? Bartlett's test
-- (variance_check) looks at all configs at once and, with 2 seeds each, rarely notices one config whose
-- noise is 2–4 times the others'; pooling would then give that config's comparisons intervals far too
-- narrow. So each side of a pooled comparison is also checked alone. One row per config with ≥ 2 finished
-- seeds in a pool (variance_check) that has other configs too:
--   spread_df:     n_i − 1
--   others_df:     pooled_df − (n_i − 1), the other configs' pooled df
--   others_sd:     their pooled sd, √((pooled_df · s_p² − (n_i − 1) s_i²) / others_df)
--   spread_ratio:  s_i² / others_sd² (F on spread_df and others_df under equal variances)
--   spread_limit:  f95(spread_df, others_df), the upper 5% point of that F
--   spread_in_line: spread_ratio ≤ spread_limit (TRUE when there is no usable limit). One-sided: a config
--                   quieter than the rest makes the pooled interval wider than it needs, not wrong.
CREATE OR REPLACE VIEW spread_check AS
WITH others AS (
    SELECT c.space, c.metric, c.family, c.config_id, c.n_seeds - 1 AS spread_df, c.score_sd,
           v.pooled_df - (c.n_seeds - 1) AS others_df,
           (v.pooled_df * v.pooled_sd ^ 2 - (c.n_seeds - 1) * c.score_sd ^ 2) / (v.pooled_df - (c.n_seeds - 1))
               AS others_var
    FROM configs c JOIN variance_check v USING (space, metric, family)
    WHERE c.n_seeds >= 2 AND c.score_sd IS NOT NULL AND v.pooled_df > c.n_seeds - 1
)
SELECT space, metric, family, config_id, spread_df, others_df, sqrt(greatest(others_var, 0)) AS others_sd,
       CASE WHEN others_var > 0 THEN score_sd ^ 2 / others_var END AS spread_ratio,
       f95(spread_df, others_df) AS spread_limit,
       CASE WHEN others_var > 0 THEN score_sd ^ 2 / others_var <= coalesce(f95(spread_df, others_df), 'inf'::DOUBLE)
            ELSE score_sd = 0
       END AS spread_in_line
FROM others;

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
CREATE OR REPLACE MACRO vs_baseline_at(fixed_tolerance) AS TABLE
WITH base AS (
    SELECT space, metric, family, config_id AS b_config_id, score_mean AS b_mean, score_sd AS b_sd, n_seeds AS b_n,
           params AS b_params,
           train_samples_per_s AS b_train, infer_samples_per_s AS b_infer, peak_mem_bytes AS b_mem,
           depth AS b_depth, head_dim AS b_head_dim, at_chance AS b_at_chance, n_unlearned AS b_unlearned
    FROM configs WHERE is_baseline
),
paired AS (
    SELECT c.*, b.* EXCLUDE (space, metric, family), t.tol,
           v.pooled_sd, v.pooled_df, v.equal_variance, v.bartlett_p, v.note AS variance_note,
           sc.spread_in_line AS c_in_line, sc.spread_ratio AS c_spread_ratio, sc.spread_limit AS c_spread_limit,
           sb.spread_in_line AS b_in_line, sb.spread_ratio AS b_spread_ratio, sb.spread_limit AS b_spread_limit,
           c.score_mean - b.b_mean AS delta,
           c.score_sd ^ 2 / c.n_seeds + b.b_sd ^ 2 / b.b_n AS var_delta,
           welch_df(c.score_sd, c.n_seeds, b.b_sd, b.b_n) AS welch_df,
           better_sign(c.metric_mode) AS better  -- +1: higher is better
    FROM configs c JOIN base b USING (space, metric, family) JOIN space_tolerance_at(fixed_tolerance) t USING (space, metric)
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
    num_kv_heads, conditioning, is_baseline, n_seeds, b_n AS baseline_seeds, n_failed, metric, metric_mode, score_mean, score_sd,
    b_mean AS baseline_score, delta, delta_lo, delta_hi, welch_df, tol AS tolerance, gain, gain_lo, gain_hi,
    100.0 * (params - b_params) / b_params AS delta_params_pct,
    100.0 * (train_samples_per_s - b_train) / b_train AS delta_train_throughput_pct,
    100.0 * (infer_samples_per_s - b_infer) / b_infer AS delta_infer_throughput_pct,
    100.0 * (peak_mem_bytes - b_mem) / b_mem AS delta_mem_pct,
    params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes, kappa_mean,
    kv_cache_bytes_per_token, token_latency_ms,
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

-- depth_edge: along depth, for each (space, num_heads, head_dim, num_kv_heads, conditioning) at the baseline's
-- width and MLP (and per model family and headline metric: a space of one family judged on one metric has one row per shape). Read from the verdicts, so it
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
            PARTITION BY space, metric, family, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads, conditioning
            ORDER BY depth DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE depth <= baseline_depth
)
SELECT space, metric, family, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads, conditioning,
    min(depth) FILTER (WHERE misses_above = 0 AND verdict = 'holds') AS holds_down_to_depth,
    -- rows with misses_above >= 1 are exactly the depths below holds_down_to_depth
    max(depth) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_depth,
    list(depth ORDER BY depth) AS depths_tried,
    list(verdict ORDER BY depth) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, family, embed_dim, mlp_dim, num_heads, head_dim, num_kv_heads DESC, conditioning;

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
            PARTITION BY space, metric, family, depth, embed_dim, mlp_dim, num_heads // num_kv_heads, conditioning
            ORDER BY head_dim DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS misses_above
    FROM vs_baseline
    WHERE attn_dim = embed_dim AND head_dim <= baseline_head_dim
)
SELECT space, metric, family, depth, embed_dim, mlp_dim, num_heads // num_kv_heads AS heads_per_kv_head, conditioning,
    min(head_dim) FILTER (WHERE misses_above = 0 AND verdict = 'holds') AS holds_down_to_head_dim,
    max(head_dim) FILTER (WHERE misses_above >= 1 AND verdict = 'breaks') AS breaks_at_head_dim,
    list(head_dim ORDER BY head_dim) AS head_dims_tried,
    list(verdict ORDER BY head_dim) AS verdicts
FROM ranked
GROUP BY ALL
ORDER BY space, family, embed_dim, mlp_dim, depth, heads_per_kv_head, conditioning;

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
SELECT space, config_id, metric, metric_mode, family, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim,
       num_kv_heads, conditioning, n_seeds, score_mean, score_se, params, flops_per_sample, train_samples_per_s, infer_samples_per_s, peak_mem_bytes,
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
           c.mlp_dim, c.attn_dim, c.num_kv_heads, c.conditioning, c.n_seeds, c.score_mean, c.score_sd, c.cost_kind,
           c.cost,
           m.config_id AS matched_config_id, m.depth AS matched_depth, m.num_heads AS matched_num_heads,
           m.head_dim AS matched_head_dim, m.embed_dim AS matched_embed_dim, m.mlp_dim AS matched_mlp_dim,
           m.attn_dim AS matched_attn_dim, m.num_kv_heads AS matched_num_kv_heads,
           m.conditioning AS matched_conditioning, coalesce(m.is_baseline, false) AS matched_is_baseline,
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
SELECT space, metric, metric_mode, family, config_id, depth, num_heads, head_dim, embed_dim, mlp_dim, attn_dim,
       num_kv_heads, conditioning, n_seeds, score_mean, cost_kind, cost,
       matched_config_id, matched_depth, matched_num_heads, matched_head_dim, matched_embed_dim, matched_mlp_dim,
       matched_attn_dim, matched_num_kv_heads, matched_conditioning, matched_is_baseline, matched_n_seeds, matched_score, matched_cost,
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
           t.num_kv_heads, t.conditioning, t.head_dim_rule, t.seed, t.metric, t.score, l.attention, l.layer, l.kappa, l.kappa_max
    FROM last_probe l JOIN trials t USING (trial_id)
    WHERE l.epoch = l.last_epoch AND t.status = 'ok'
)
SELECT space, family, depth, num_heads, head_dim, embed_dim, attn_dim, num_kv_heads, conditioning,
       any_value(head_dim_rule) AS head_dim_rule,
       attention, layer, count(DISTINCT seed) AS n_seeds,
       median(kappa) AS kappa_median, avg(kappa) AS kappa_mean, max(kappa_max) AS kappa_max,
       metric, avg(score) AS score_mean
FROM final_kappa
GROUP BY GROUPING SETS (
    (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim, num_kv_heads, conditioning, attention, layer),
    (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim, num_kv_heads, conditioning, attention),
    (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim, num_kv_heads, conditioning))
ORDER BY space, family, depth, num_heads, head_dim, attn_dim, num_kv_heads DESC, conditioning, attention NULLS LAST,
         layer NULLS LAST;

-- kappa_accuracy: does κ track the headline metric across configs? Per space, metric and family:
-- Spearman's rank correlation between each config's final κ (configs.kappa_mean: the trials' kappa_mean,
-- the model-level κ of the last probe, averaged over finished seeds) and its mean score (score_mean),
-- across configs with both, in two scopes:
--   scope 'across_widths': every such config of the space, metric and family (embed_dim, attn_dim and
--                          mlp_dim NULL)
--   scope 'fixed_width':   within each group of equal embed_dim, attn_dim and mlp_dim (one row per group,
--                          named by those columns): only depth, heads and head_dim vary, so the attention
--                          block's total width is the same for every config compared (the width control's
--                          fixed-attn_dim arm, not its fixed-head_dim arm, where attn_dim grows with heads)
--   spearman_rho: the Pearson correlation of average ranks (ties share the mean of their ranks), as
--                 scipy.stats.spearmanr (clipped to [−1, 1] and rounded to 12 decimals, so that sums
--                 taken in a different order by parallel threads give the same bits); NULL when κ or the
--                 score does not vary
--   rho_lo/hi:    a 95% percentile bootstrap interval: B = 1,000 resamples of the group's n configs with
--                 replacement; resample b takes, for j = 0 … n−1, the config numbered
--                 mix32(mix32(b) XOR j) mod n (configs numbered 0 … n−1 in config_id order), so every query
--                 draws the same resamples; its ρ is computed as above (ranks within the resample),
--                 resamples where κ or the score does not vary are left out (`resamples` counts those
--                 kept), and rho_lo/hi are their 2.5% and 97.5% quantiles (linear interpolation, as
--                 quantile_cont and numpy.quantile)
--   n_configs:    configs in the group; groups of fewer than 3 are left out (a rank correlation needs 3)
-- Reading it: the paper's mechanism says fewer-conditioned (lower κ) attention trains better, so expect
-- ρ < 0 for a metric where higher is better (top1, accuracy) and ρ > 0 for one where lower is (val_loss).
CREATE OR REPLACE VIEW kappa_accuracy AS
WITH points AS (
    SELECT space, metric, family, 'across_widths' AS scope, NULL::BIGINT AS embed_dim, NULL::BIGINT AS attn_dim,
           NULL::BIGINT AS mlp_dim, config_id, kappa_mean AS kappa, score_mean AS score
    FROM configs WHERE n_seeds > 0 AND score_mean IS NOT NULL AND kappa_mean IS NOT NULL
    UNION ALL
    SELECT space, metric, family, 'fixed_width' AS scope, embed_dim, attn_dim, mlp_dim, config_id,
           kappa_mean AS kappa, score_mean AS score
    FROM configs WHERE n_seeds > 0 AND score_mean IS NOT NULL AND kappa_mean IS NOT NULL
),
numbered AS (
    SELECT *,
        dense_rank() OVER (ORDER BY space, metric, family, scope, embed_dim, attn_dim, mlp_dim) AS grp,
        row_number() OVER (PARTITION BY space, metric, family, scope, embed_dim, attn_dim, mlp_dim
                           ORDER BY config_id) - 1 AS i,
        count(*) OVER (PARTITION BY space, metric, family, scope, embed_dim, attn_dim, mlp_dim) AS n
    FROM points
),
groups AS (
    SELECT grp, any_value(space) AS space, any_value(metric) AS metric, any_value(family) AS family,
           any_value(scope) AS scope, any_value(embed_dim) AS embed_dim, any_value(attn_dim) AS attn_dim,
           any_value(mlp_dim) AS mlp_dim, any_value(n) AS n
    FROM numbered WHERE n >= 3 GROUP BY grp
),
-- average ranks: the lowest rank of the tied run plus half its length − 1
point_ranks AS (
    SELECT grp,
        rank() OVER (PARTITION BY grp ORDER BY kappa) + (count(*) OVER (PARTITION BY grp, kappa) - 1) / 2.0 AS rk,
        rank() OVER (PARTITION BY grp ORDER BY score) + (count(*) OVER (PARTITION BY grp, score) - 1) / 2.0 AS rs
    FROM numbered WHERE n >= 3
),
point AS (
    SELECT grp, CASE WHEN var_pop(rk) > 0 AND var_pop(rs) > 0 THEN round(greatest(-1, least(1, corr(rk, rs))), 12) END AS rho
    FROM point_ranks GROUP BY grp
),
resamples AS (
    SELECT b, mix32(b) AS b_hash FROM range(0, 1000) AS r(b)
),
slots AS (
    SELECT grp, n, unnest(range(n)) AS j FROM groups
),
drawn AS (
    SELECT s.grp, r.b, p.kappa, p.score
    FROM slots s CROSS JOIN resamples r
    JOIN numbered p ON p.grp = s.grp AND p.i = (mix32(xor(r.b_hash, s.j::UBIGINT)) % s.n::UBIGINT)::BIGINT
),
drawn_ranks AS (
    SELECT grp, b,
        rank() OVER (PARTITION BY grp, b ORDER BY kappa)
            + (count(*) OVER (PARTITION BY grp, b, kappa) - 1) / 2.0 AS rk,
        rank() OVER (PARTITION BY grp, b ORDER BY score)
            + (count(*) OVER (PARTITION BY grp, b, score) - 1) / 2.0 AS rs
    FROM drawn
),
boot AS (
    SELECT grp, b, CASE WHEN var_pop(rk) > 0 AND var_pop(rs) > 0 THEN round(greatest(-1, least(1, corr(rk, rs))), 12) END AS rho
    FROM drawn_ranks GROUP BY grp, b
),
interval AS (
    SELECT grp, quantile_cont(rho, 0.025) AS rho_lo, quantile_cont(rho, 0.975) AS rho_hi, count(rho) AS resamples
    FROM boot GROUP BY grp
)
SELECT g.space, g.metric, g.family, g.scope, g.embed_dim, g.attn_dim, g.mlp_dim, g.n AS n_configs,
       p.rho AS spearman_rho, i.rho_lo, i.rho_hi, i.resamples
FROM groups g JOIN point p USING (grp) JOIN interval i USING (grp)
ORDER BY g.space, g.metric, g.family, g.scope, g.embed_dim, g.attn_dim, g.mlp_dim;

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
    SELECT c.space, c.metric, c.metric_mode, c.family, c.depth, c.num_heads, c.head_dim, c.embed_dim, c.mlp_dim,
           c.num_kv_heads, c.conditioning, c.config_id, c.n_seeds, c.score_mean, c.score_sd, c.kappa_mean,
           c.log_kappa_mean, c.log_kappa_sd, c.n_kappa,
           z.config_id AS none_config_id, z.n_seeds AS none_seeds, z.score_mean AS none_score, z.score_sd AS none_sd,
           z.kappa_mean AS none_kappa_mean, z.log_kappa_mean AS none_log_kappa, z.log_kappa_sd AS none_log_kappa_sd,
           z.n_kappa AS none_n_kappa,
           better_sign(c.metric_mode) AS better
    FROM configs c JOIN configs z
      ON z.space = c.space AND z.metric = c.metric AND z.family IS NOT DISTINCT FROM c.family AND z.depth = c.depth
     AND z.num_heads = c.num_heads AND z.head_dim = c.head_dim AND z.embed_dim = c.embed_dim
     AND z.mlp_dim = c.mlp_dim AND z.num_kv_heads = c.num_kv_heads AND z.conditioning = 'none'
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
SELECT space, metric, metric_mode, family, depth, num_heads, head_dim, embed_dim, mlp_dim, num_kv_heads,
       conditioning, config_id, none_config_id, n_seeds, none_seeds, score_mean, none_score,
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
ORDER BY space, metric, family, embed_dim, mlp_dim, depth, num_heads, num_kv_heads, conditioning;

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
