-- The core views: each space's settings, each config's seeds pooled (configs), the seeds that learned
-- nothing, the checks on the noise, and the trials that did not finish (sweep/analysis/views/__init__.py
-- says how the files fit).

-- space_settings: the latest recorded settings of each space: its headline metric and direction, the
-- latest tolerance recorded (NULL for a space known only from imports without one) and the metric that
-- tolerance was set for (a tolerance in points of top-1 must not judge a loss), its question, and what the
-- latest sweep's questions recorded (`questions`, JSON: sweep/questions/base.py's Question.record; an
-- import records none, so it leaves a sweep's in place), and its search (`search`, JSON: the space's `search:`
-- as validated, an edge search's with its lattice, sweep/results/sink.py search_json; an import records none).
CREATE OR REPLACE VIEW space_settings AS
SELECT space,
       arg_max(metric, written_at) AS metric,
       arg_max(metric_mode, written_at) AS metric_mode,
       arg_max(tolerance, written_at) FILTER (WHERE tolerance IS NOT NULL) AS tolerance,
       arg_max(metric, written_at) FILTER (WHERE tolerance IS NOT NULL) AS tolerance_metric,
       arg_max(question, written_at) AS question,
       arg_max(questions, written_at) FILTER (WHERE questions IS NOT NULL) AS questions,
       arg_max(search, written_at) FILTER (WHERE search IS NOT NULL) AS search
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
-- Each question's label columns (sweep/questions/: Question.labels), by the aggregate each declares, as defined there.
-- device_s_total: what the config cost, in device-seconds (trials.device_s: wall × GPUs, or CPUs without a GPU),
-- summed over every row of it, failed and repeated ones included (they spent their devices too); NULL when none of
-- its rows recorded device_s (written before it was).
-- A tuned sweep's selection runs (tune_phase = 'selection', sweep/questions/tuning.py) are not rows of configs, nor
-- of its cost: their scores chose the rate, so no verdict may count them (lr_curve and tune_choice read them).
-- lr_arm: 'tuned' for a config whose rows are a tuned sweep's verdict seeds, else 'untuned'; vs_baseline judges
-- each arm against its own baseline.
CREATE OR REPLACE VIEW configs AS
WITH judged AS (
    SELECT * FROM trials WHERE tune_phase IS DISTINCT FROM 'selection'
),
cost AS (
    SELECT space, config_id, metric, sum(device_s) AS device_s_total FROM judged GROUP BY space, config_id, metric
),
one_row_per_seed AS (
    SELECT * FROM judged WHERE status = 'ok'
    QUALIFY row_number() OVER (
        PARTITION BY space, config_id, metric, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC
    ) = 1
    UNION ALL BY NAME
    SELECT * FROM judged WHERE status IS DISTINCT FROM 'ok'
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
    -- @question-axes (sweep/analysis/views/__init__.py core_sql puts each declared axis here, Question.axes)
    -- @question-labels (sweep/analysis/views/__init__.py core_sql puts each declared label's aggregate here)
    CASE WHEN bool_or(tune_phase = 'verdict') THEN 'tuned' ELSE 'untuned' END AS lr_arm,
    bool_or(is_baseline) AS is_baseline,
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
    FROM trials WHERE status = 'ok' AND tune_phase IS DISTINCT FROM 'selection'  -- as configs: verdict rows only
    QUALIFY row_number() OVER (
        PARTITION BY space, config_id, metric, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC
    ) = 1
),
learned AS (
    SELECT space, config_id, metric, count(*) AS siblings_learned, avg(score) AS siblings_mean
    FROM seeds WHERE NOT stuck GROUP BY ALL
)
SELECT s.space, s.metric, s.metric_mode, s.family, s.config_id, s.is_baseline, s.depth, s.num_heads, s.head_dim,
       s.embed_dim, s.mlp_dim,
       -- @question-axis-columns (core_sql names each declared axis here, Question.axes: only seeds has them)
       s.seed, s.trial_id, s.score, s.chance_score,
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
        -- ≥ 0 exactly (the pooled variance, an arithmetic mean, is at least the geometric mean of the same
        -- variances); greatest() drops the −1e-15 that float sums give when all variances are equal
        CASE WHEN configs_pooled >= 2 AND var_min > 0 THEN
            greatest(0.0, (pooled_df * ln(pooled_var) - df_log_var)
                / (1 + (inverse_df - 1.0 / pooled_df) / (3 * (configs_pooled - 1))))
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
