-- The core analysis views: every config against its baseline, the edges, the Pareto front, matched
-- budgets, κ (sweep/analysis/views/compat.sql's header says how the files fit).

-- space_settings: the latest recorded settings of each space: its headline metric and direction, the
-- latest tolerance recorded (NULL for a space known only from imports without one) and the metric that
-- tolerance was set for (a tolerance in points of top-1 must not judge a loss), its question, and what the
-- latest sweep's questions recorded (`questions`, JSON: sweep/questions/base.py's Question.record; an
-- import records none, so it leaves a sweep's in place).
CREATE OR REPLACE VIEW space_settings AS
SELECT space,
       arg_max(metric, written_at) AS metric,
       arg_max(metric_mode, written_at) AS metric_mode,
       arg_max(tolerance, written_at) FILTER (WHERE tolerance IS NOT NULL) AS tolerance,
       arg_max(metric, written_at) FILTER (WHERE tolerance IS NOT NULL) AS tolerance_metric,
       arg_max(question, written_at) AS question,
       arg_max(questions, written_at) FILTER (WHERE questions IS NOT NULL) AS questions
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
-- device_s_total: what the config cost, in device-seconds (trials.device_s: wall × GPUs, or CPUs without a GPU),
-- summed over every row of it, failed and repeated ones included (they spent their devices too); NULL when none of
-- its rows recorded device_s (written before it was).
CREATE OR REPLACE VIEW configs AS
WITH cost AS (
    SELECT space, config_id, metric, sum(device_s) AS device_s_total FROM trials GROUP BY space, config_id, metric
),
one_row_per_seed AS (
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
    avg(1.0 / train_samples_per_s) FILTER (WHERE status = 'ok' AND train_samples_per_s > 0) AS train_s_per_sample,
    any_value(cost.device_s_total) AS device_s_total
FROM one_row_per_seed LEFT JOIN cost USING (space, config_id, metric)
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
--   device_hours: what the config's verdict cost, configs.device_s_total / 3600 (every trial of the config)
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
