-- The known-answers question's views (sweep/questions/expectations.py; docs/known_answers.md states every
-- formula below in words).

-- boschloo_p(k_a, n_a, k_b, n_b): the two-sided p-value of Boschloo's exact unconditional test of equal solve
-- rates, k_a of n_a seeds against k_b of n_b (scipy.stats.boschloo_exact). `sweep sql` and the report register
-- it as a Python function (Question.python_functions); this stand-in, for a plain duckdb shell, is NULL: there
-- a solve-rate claim that needs it ("beats") stays 'unclear'.
CREATE OR REPLACE MACRO boschloo_p(k_a, n_a, k_b, n_b) AS NULL::DOUBLE;

-- t_quantile(p, dof): the p quantile of Student's t (dof NULL: the normal's), for intervals at a level other
-- than 95% (a family at some X, Holm-adjusted). Python in `sweep sql` (scipy.stats.t.ppf); this stand-in knows
-- only p = 0.975.
CREATE OR REPLACE MACRO t_quantile(p, dof) AS CASE
    WHEN p = 0.975 AND dof IS NULL THEN 1.959963984540054
    WHEN p = 0.975 THEN t95(dof)
END;

-- wilson_lo(k, n, z), wilson_hi(k, n, z): Wilson's score interval of the proportion k / n at the normal
-- quantile z: (p + z²/2n ∓ z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n), p = k / n.
CREATE OR REPLACE MACRO wilson_lo(k, n, z) AS
    (k / n + z * z / (2 * n) - z * sqrt((k / n) * (1 - k / n) / n + z * z / (4 * n * n))) / (1 + z * z / n);
CREATE OR REPLACE MACRO wilson_hi(k, n, z) AS
    (k / n + z * z / (2 * n) + z * sqrt((k / n) * (1 - k / n) / n + z * z / (4 * n * n))) / (1 + z * z / n);

-- expectation_members: one row per comparison a space's latest sweep recorded (space_settings.questions, its
-- `expectations` list: each claim, or each member of a family, with the config id of each side as the plan
-- resolved it), judged on the claim's metric (any metric or cost a trial records; default the headline) with
-- each side's finished seeds (the latest row of each seed):
--   name, member, rule, members   the claim; its member ('' alone, 'embed_dim=64' in a family); 'one',
--              'every' or 'some'; how many members the claim has
--   a_shape, b_shape, a_config, b_config, a_added, b_added   each side as the space states it, its config,
--              and whether that config was added for the claim (a config of its own); b NULL for a level
--   a_mean, n_a, b_mean, n_b, a_sd, b_sd   each side's mean, finished seeds and sample sd of the value
--   a_solved, b_solved   with solved_at: each side's seeds whose value reaches it (≥ for a metric where
--              higher is better, ≤ otherwise)
--   expected, direction, tolerance, relative, level, solved_at   the claim's own; level: a number (chance:
--              the data set's chance level, resolved by the plan)
--   confidence 0.95; in a family at some X, 1 − 0.05 / members (Holm's first step: some member holds iff the
--              smallest p-value is below 0.05 / members, i.e. some member's interval at that level clears)
--   statistic  how the comparison was made:
--     'welch t'      means: up = a − c₊·b − t, dn = a − c₋·b + t, each with its Welch interval
--                    est ∓ q(ν)·√(s_a²/n_a + c²·s_b²/n_b), ν Welch–Satterthwaite with (c·s_b); c₊ = 1 + r,
--                    c₋ = 1 − r (r = tolerance when relative, else 0; t = tolerance when absolute, else 0);
--                    q = t95 (macros.sql) at 95%, else t_quantile; needs ≥ 2 seeds a side
--     'exact'        a counted cost (parameters, FLOPs, KV-cache bytes): the same intervals of zero width
--     'one-sample t' a level: up = a − L − t, dn = a − L + t, interval ∓ q(n_a − 1)·s_a/√n_a
--     'newcombe'     solve rates: p_a − p_b with Newcombe's hybrid score interval (method 10, from the Wilson
--                    intervals at z), up = that − t, dn = that + t; a "beats" also needs boschloo_p < 1 − confidence
--     'wilson'       a solve-rate level: p_a's Wilson interval, up = p_a − L − t, dn = p_a − L + t
--   delta, delta_lo, delta_hi   the difference shown: a comparison's mean(a) − mean(b) signed so that positive
--              means a is better (a solve rate: p_a − p_b), with its interval; a level's a − L (as is)
--   ratio      mean(a) / mean(b) (comparisons of means)
--   p_value    Boschloo's two-sided p (solve-rate comparisons)
--   device     the one device both sides of a throughput, latency or memory claim ran on
--   chance_score, a_at_chance, b_at_chance, must_learn   the headline's chance level, each side at chance
--              (configs.at_chance), and which side must have learned for the claim to be judged: the side
--              the claim says wins ('a' for 'a beats b', 'b' for 'b beats a' and for 'a at least as good
--              as b', the reference), 'either' for 'no difference', 'none' for levels and costs
--   found      'not run' (a side has no finished seed), 'different devices' (a per-device cost whose sides
--              did not all run on one named device), 'did not learn' (must_learn unmet), 'no interval' (a side
--              with one seed where the statistic needs two), then from the intervals, with a raw a above b:
--              above = lo(up) > 0, below = hi(dn) < 0, within = lo(dn) ≥ 0 and hi(up) ≤ 0; a wins = above
--              for a max metric, below for a min one (b wins the other): 'a beats b', 'b beats a', 'no
--              difference' (within), 'a at least as good as b' (lo(dn) ≥ 0 for max, hi(up) ≤ 0 for min),
--              'a at least the level' (lo(dn) ≥ 0) / 'a below the level' (below), 'a at most the level'
--              (hi(up) ≤ 0) / 'a above the level' (above), else 'unclear'
--   verdict    'agrees' (found = expected), 'disagrees' (found a definite result, not the expected one),
--              else 'inconclusive'
CREATE OR REPLACE VIEW expectation_members AS
WITH recorded AS (
    SELECT space, metric AS headline, metric_mode AS headline_mode, unnest(from_json(json_extract(questions, '$.expectations'),
        '[{"name": "VARCHAR", "claim": "VARCHAR", "source": "VARCHAR", "expected": "VARCHAR", "direction": "VARCHAR",
           "tolerance": "DOUBLE", "relative": "BOOLEAN", "metric": "VARCHAR", "metric_mode": "VARCHAR",
           "exact": "BOOLEAN", "per_device": "BOOLEAN", "level": "DOUBLE", "solved_at": "DOUBLE",
           "a_shape": "VARCHAR", "b_shape": "VARCHAR", "a_config": "VARCHAR", "b_config": "VARCHAR",
           "a_added": "BOOLEAN", "b_added": "BOOLEAN", "rule": "VARCHAR", "member": "VARCHAR",
           "members": "BIGINT"}]'), recursive := true),
           json_extract(questions, '$.tuning') IS NOT NULL AS tuned_sweep  -- the latest sweep chose each rate
    FROM space_settings
    WHERE questions IS NOT NULL
),
tuned_ids AS (  -- each config's tuned verdict config (sweep/questions/tuning.py), by its untuned id
    SELECT space, recipe_config_id, any_value(config_id) AS config_id FROM configs WHERE lr_arm = 'tuned' GROUP BY ALL
),
stated_claims AS (  -- a side is its config's untuned rows, or (the latest sweep tuned) its tuned verdict seeds,
                    -- found by recipe_config_id (the side's untuned config id); a tuned side not yet run
                    -- names no config that exists, so it reads as not run, never as selection or untuned rows
    SELECT r.* REPLACE (
               CASE WHEN r.tuned_sweep AND r.a_config IS NOT NULL THEN coalesce(ta.config_id, 'not run: ' || r.a_config)
                    ELSE r.a_config END AS a_config,
               CASE WHEN r.tuned_sweep AND r.b_config IS NOT NULL THEN coalesce(tb.config_id, 'not run: ' || r.b_config)
                    ELSE r.b_config END AS b_config)
    FROM recorded r
    LEFT JOIN tuned_ids ta ON r.tuned_sweep AND ta.space = r.space AND ta.recipe_config_id = r.a_config
    LEFT JOIN tuned_ids tb ON r.tuned_sweep AND tb.space = r.space AND tb.recipe_config_id = r.b_config
),
claims AS (  -- a claim recorded before a key existed reads as the original kind: a comparison of headline means
    SELECT space, name, claim, source, expected, a_shape, b_shape, a_config, b_config, level, solved_at,
           coalesce(metric, headline) AS metric, coalesce(metric_mode, headline_mode) AS metric_mode,
           CASE expected WHEN 'a beats b' THEN 'a_beats_b' WHEN 'b beats a' THEN 'b_beats_a'
               WHEN 'no difference' THEN 'no_difference' WHEN 'a at least as good as b' THEN 'a_at_least_b'
               WHEN 'a at least the level' THEN 'a_at_least' WHEN 'a at most the level' THEN 'a_at_most'
               ELSE direction END AS direction,  -- the words expected are the claim's, as recorded
           coalesce(tolerance, 0) AS tolerance, coalesce(relative, false) AS relative,
           coalesce(exact, false) AS exact, coalesce(per_device, false) AS per_device,
           coalesce(a_added, false) AS a_added, coalesce(b_added, false) AS b_added,
           coalesce(rule, 'one') AS rule, coalesce(member, '') AS member, coalesce(members, 1) AS members,
           CASE WHEN rule = 'some' THEN 1 - 0.05 / members ELSE 0.95 END AS confidence, headline, tuned_sweep
    FROM stated_claims
),
seeds AS (  -- no verdict counts a run that chose a rate (sweep/questions/tuning.py)
    SELECT * FROM trials WHERE status = 'ok' AND tune_phase IS DISTINCT FROM 'selection'
    QUALIFY row_number() OVER (PARTITION BY space, config_id, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC) = 1
),
measured AS (  -- every claimable column of each seed (workers/metrics.py METRICS and COSTS) that the files have,
               -- one row each; the headline's value is the trial's score
    SELECT space, config_id, seed, device, measure, value
    FROM (UNPIVOT (SELECT s.space, s.config_id, s.seed, s.device, s.metric AS headline,
                          COLUMNS('^(@claim-names)$')::DOUBLE
                   FROM seeds s)
          ON COLUMNS('^(@claim-names)$')
          INTO NAME measure VALUE value)
    WHERE measure <> headline
    UNION ALL
    SELECT space, config_id, seed, device, metric AS measure, score AS value FROM seeds WHERE score IS NOT NULL
),
sides AS (
    SELECT c.space, c.name, c.member, s.side, s.config_id
    FROM claims c, LATERAL (VALUES ('a', c.a_config), ('b', c.b_config)) AS s(side, config_id)
    WHERE s.config_id IS NOT NULL
),
side_stats AS (
    SELECT s.space, s.name, s.member, s.side,
           count(m.value) AS n, avg(m.value) AS mean, stddev_samp(m.value) AS sd,
           count(m.value) FILTER (WHERE better_sign(c.metric_mode) * (m.value - c.solved_at) >= 0) AS solved,
           count(DISTINCT m.device) AS devices, count(m.value) FILTER (WHERE m.device IS NULL) AS unnamed,
           any_value(m.device) AS device
    FROM sides s JOIN claims c USING (space, name, member)
    LEFT JOIN measured m ON m.space = s.space AND m.config_id = s.config_id AND m.measure = c.metric
    GROUP BY ALL
),
paired AS (
    SELECT c.*, coalesce(a.n, 0) AS n_a, a.mean AS a_mean, a.sd AS a_sd, a.solved AS a_solved,
           coalesce(b.n, 0) AS n_b, b.mean AS b_mean, b.sd AS b_sd, b.solved AS b_solved,
           a.devices = 1 AND a.unnamed = 0 AND (c.b_config IS NULL OR (b.devices = 1 AND b.unnamed = 0
               AND a.device = b.device)) AS one_device, a.device,
           coalesce(ca.chance_score, cb.chance_score) AS chance_score,
           coalesce(ca.at_chance, false) AS a_at_chance, coalesce(cb.at_chance, false) AS b_at_chance,
           CASE WHEN c.b_config IS NULL OR c.exact OR c.per_device THEN 'none'
                WHEN c.direction = 'a_beats_b' THEN 'a' WHEN c.direction IN ('b_beats_a', 'a_at_least_b') THEN 'b'
                ELSE 'either' END AS must_learn,
           CASE WHEN c.solved_at IS NOT NULL AND c.b_config IS NULL THEN 'wilson'
                WHEN c.solved_at IS NOT NULL THEN 'newcombe'
                WHEN c.b_config IS NULL THEN 'one-sample t'
                WHEN c.exact THEN 'exact' ELSE 'welch t' END AS statistic,
           CASE WHEN c.relative THEN c.tolerance ELSE 0 END AS r,
           CASE WHEN c.relative THEN 0 ELSE c.tolerance END AS t_abs,
           CASE WHEN c.confidence = 0.95 THEN 1.959963984540054 ELSE t_quantile(1 - (1 - c.confidence) / 2, NULL) END AS z
    FROM claims c
    LEFT JOIN side_stats a ON a.space = c.space AND a.name = c.name AND a.member = c.member AND a.side = 'a'
    LEFT JOIN side_stats b ON b.space = c.space AND b.name = c.name AND b.member = c.member AND b.side = 'b'
    LEFT JOIN configs ca ON ca.space = c.space AND ca.config_id = c.a_config AND ca.metric = c.headline
    LEFT JOIN configs cb ON cb.space = c.space AND cb.config_id = c.b_config AND cb.metric = c.headline
),
spreads AS (  -- each decision's centre and half-width: up = a above b (or the level) by the margin, dn = below
    SELECT *,
        CASE statistic WHEN 'welch t' THEN sqrt(a_sd ^ 2 / n_a + (1 + r) ^ 2 * b_sd ^ 2 / n_b)
                       WHEN 'one-sample t' THEN a_sd / sqrt(n_a) ELSE 0 END AS se_up,
        CASE statistic WHEN 'welch t' THEN sqrt(a_sd ^ 2 / n_a + (1 - r) ^ 2 * b_sd ^ 2 / n_b)
                       WHEN 'one-sample t' THEN a_sd / sqrt(n_a) ELSE 0 END AS se_dn,
        CASE statistic WHEN 'welch t' THEN welch_df(a_sd, n_a, (1 + r) * b_sd, n_b)
                       WHEN 'one-sample t' THEN CASE WHEN n_a >= 2 THEN n_a - 1 END END AS df_up,
        CASE statistic WHEN 'welch t' THEN welch_df(a_sd, n_a, (1 - r) * b_sd, n_b)
                       WHEN 'one-sample t' THEN CASE WHEN n_a >= 2 THEN n_a - 1 END END AS df_dn,
        a_solved / n_a AS p_a, b_solved / n_b AS p_b
    FROM paired
),
quantiles AS (
    SELECT *,
        CASE WHEN statistic IN ('welch t', 'one-sample t') THEN
            CASE WHEN confidence = 0.95 THEN t95(df_up) ELSE t_quantile(1 - (1 - confidence) / 2, df_up) END END AS q_up,
        CASE WHEN statistic IN ('welch t', 'one-sample t') THEN
            CASE WHEN confidence = 0.95 THEN t95(df_dn) ELSE t_quantile(1 - (1 - confidence) / 2, df_dn) END END AS q_dn,
        CASE WHEN statistic = 'newcombe' AND n_a >= 1 AND n_b >= 1 THEN
            p_a - p_b - sqrt((p_a - wilson_lo(a_solved, n_a, z)) ^ 2 + (wilson_hi(b_solved, n_b, z) - p_b) ^ 2)
             WHEN statistic = 'wilson' AND n_a >= 1 THEN wilson_lo(a_solved, n_a, z) - level END AS rate_lo,
        CASE WHEN statistic = 'newcombe' AND n_a >= 1 AND n_b >= 1 THEN
            p_a - p_b + sqrt((wilson_hi(a_solved, n_a, z) - p_a) ^ 2 + (p_b - wilson_lo(b_solved, n_b, z)) ^ 2)
             WHEN statistic = 'wilson' AND n_a >= 1 THEN wilson_hi(a_solved, n_a, z) - level END AS rate_hi,
        CASE WHEN statistic = 'newcombe' THEN boschloo_p(a_solved, n_a, b_solved, n_b) END AS p_value
    FROM spreads
),
bounds AS (
    SELECT *,
        CASE WHEN statistic IN ('newcombe', 'wilson') THEN rate_lo - t_abs
             WHEN statistic = 'exact' AND n_a >= 1 AND n_b >= 1 THEN a_mean - (1 + r) * b_mean - t_abs
             WHEN statistic = 'one-sample t' THEN a_mean - level - t_abs - q_up * se_up
             ELSE a_mean - (1 + r) * b_mean - t_abs - q_up * se_up END AS up_lo,
        CASE WHEN statistic IN ('newcombe', 'wilson') THEN rate_hi - t_abs
             WHEN statistic = 'exact' AND n_a >= 1 AND n_b >= 1 THEN a_mean - (1 + r) * b_mean - t_abs
             WHEN statistic = 'one-sample t' THEN a_mean - level - t_abs + q_up * se_up
             ELSE a_mean - (1 + r) * b_mean - t_abs + q_up * se_up END AS up_hi,
        CASE WHEN statistic IN ('newcombe', 'wilson') THEN rate_lo + t_abs
             WHEN statistic = 'exact' AND n_a >= 1 AND n_b >= 1 THEN a_mean - (1 - r) * b_mean + t_abs
             WHEN statistic = 'one-sample t' THEN a_mean - level + t_abs - q_dn * se_dn
             ELSE a_mean - (1 - r) * b_mean + t_abs - q_dn * se_dn END AS dn_lo,
        CASE WHEN statistic IN ('newcombe', 'wilson') THEN rate_hi + t_abs
             WHEN statistic = 'exact' AND n_a >= 1 AND n_b >= 1 THEN a_mean - (1 - r) * b_mean + t_abs
             WHEN statistic = 'one-sample t' THEN a_mean - level + t_abs + q_dn * se_dn
             ELSE a_mean - (1 - r) * b_mean + t_abs + q_dn * se_dn END AS dn_hi,
        -- the difference shown, signed so that positive means a is better (a level's: a − L as is)
        CASE WHEN statistic = 'newcombe' THEN p_a - p_b WHEN statistic = 'wilson' THEN p_a - level
             WHEN statistic = 'one-sample t' THEN a_mean - level
             ELSE better_sign(metric_mode) * (a_mean - b_mean) END AS delta,
        CASE WHEN statistic = 'welch t' AND n_a >= 2 AND n_b >= 2 THEN
            CASE WHEN confidence = 0.95 THEN t95(welch_df(a_sd, n_a, b_sd, n_b))
                 ELSE t_quantile(1 - (1 - confidence) / 2, welch_df(a_sd, n_a, b_sd, n_b)) END
            * sqrt(a_sd ^ 2 / n_a + b_sd ^ 2 / n_b)
             WHEN statistic = 'one-sample t' THEN q_up * se_up
             WHEN statistic = 'exact' THEN 0 END AS half_width
    FROM quantiles
),
decided AS (
    SELECT *,
        up_lo > 0 AND (statistic <> 'newcombe' OR p_value < 1 - confidence) AS above,
        dn_hi < 0 AND (statistic <> 'newcombe' OR p_value < 1 - confidence) AS below,
        dn_lo >= 0 AND up_hi <= 0 AS within,
        CASE WHEN better_sign(CASE WHEN solved_at IS NOT NULL THEN 'max' ELSE metric_mode END) = 1
             THEN dn_lo >= 0 ELSE up_hi <= 0 END AS not_worse,
        better_sign(CASE WHEN solved_at IS NOT NULL THEN 'max' ELSE metric_mode END) = 1 AS higher_better
    FROM bounds
),
found AS (
    SELECT *, CASE
        WHEN n_a = 0 OR (b_config IS NOT NULL AND n_b = 0) THEN 'not run'
        WHEN per_device AND NOT coalesce(one_device, false) THEN 'different devices'
        WHEN (must_learn = 'a' AND a_at_chance) OR (must_learn = 'b' AND b_at_chance)
             OR (must_learn = 'either' AND a_at_chance AND b_at_chance) THEN 'did not learn'
        WHEN up_lo IS NULL OR dn_hi IS NULL THEN 'no interval'
        WHEN direction = 'a_at_least' THEN CASE WHEN dn_lo >= 0 THEN 'a at least the level'
                                                WHEN below THEN 'a below the level' ELSE 'unclear' END
        WHEN direction = 'a_at_most' THEN CASE WHEN up_hi <= 0 THEN 'a at most the level'
                                               WHEN above THEN 'a above the level' ELSE 'unclear' END
        WHEN direction = 'a_at_least_b' AND not_worse THEN 'a at least as good as b'
        WHEN (higher_better AND above) OR (NOT higher_better AND below) THEN
            CASE WHEN direction = 'a_at_least_b' THEN 'a at least as good as b' ELSE 'a beats b' END
        WHEN (higher_better AND below) OR (NOT higher_better AND above) THEN 'b beats a'
        WHEN within AND direction <> 'a_at_least_b' THEN 'no difference'
        ELSE 'unclear'
    END AS found
    FROM decided
)
SELECT space, name, member, rule, members, claim, source, metric, a_shape, b_shape, a_config, b_config, a_added,
       b_added, a_mean, n_a, a_sd, b_mean, n_b, b_sd, a_solved, b_solved, expected, direction, tolerance, relative,
       level, solved_at, confidence, statistic, delta, coalesce(rate_lo, delta - half_width) AS delta_lo,
       coalesce(rate_hi, delta + half_width) AS delta_hi, CASE WHEN b_mean <> 0 THEN a_mean / b_mean END AS ratio,
       p_value, CASE WHEN per_device AND one_device THEN device END AS device, chance_score, a_at_chance,
       b_at_chance, must_learn, found,
       CASE WHEN found = expected THEN 'agrees'
            WHEN found IN ('a beats b', 'b beats a', 'no difference', 'a at least as good as b', 'a at least the level',
                           'a below the level', 'a at most the level', 'a above the level') THEN 'disagrees'
            ELSE 'inconclusive' END AS verdict
FROM found
ORDER BY space, name, member;

-- expectations: one row per claim. A claim alone is its member's row. A family (rule 'every' or 'some') is one
-- row with one verdict: at every X, 'agrees' when every member agrees (intersection–union: each member at
-- 95%, no correction needed for "all"), 'disagrees' when any member disagrees; at some X, 'agrees' when some
-- member agrees at 1 − 0.05 / members (Holm), 'disagrees' when every member disagrees; else 'inconclusive'.
-- found says how many members agree; members_agreeing, members_disagreeing count them (a family's per-side
-- columns are NULL: `FROM expectation_members` has each member's).
CREATE OR REPLACE VIEW expectations AS
SELECT * EXCLUDE (member), CASE verdict WHEN 'agrees' THEN 1 ELSE 0 END AS members_agreeing,
       CASE verdict WHEN 'disagrees' THEN 1 ELSE 0 END AS members_disagreeing
FROM expectation_members WHERE rule = 'one'
UNION ALL BY NAME
SELECT space, name, any_value(rule) AS rule, count(*) AS members, any_value(claim) AS claim,
       any_value(source) AS source, any_value(metric) AS metric, any_value(expected) AS expected,
       any_value(direction) AS direction, any_value(tolerance) AS tolerance, any_value(confidence) AS confidence,
       count(*) FILTER (WHERE verdict = 'agrees') AS members_agreeing,
       count(*) FILTER (WHERE verdict = 'disagrees') AS members_disagreeing,
       count(*) FILTER (WHERE verdict = 'agrees') || ' of ' || count(*) || ' members agree' AS found,
       CASE WHEN any_value(rule) = 'every' THEN
                CASE WHEN bool_and(verdict = 'agrees') THEN 'agrees' WHEN bool_or(verdict = 'disagrees') THEN 'disagrees'
                     ELSE 'inconclusive' END
            ELSE CASE WHEN bool_or(verdict = 'agrees') THEN 'agrees' WHEN bool_and(verdict = 'disagrees') THEN 'disagrees'
                      ELSE 'inconclusive' END
       END AS verdict
FROM expectation_members WHERE rule <> 'one'
GROUP BY space, name
ORDER BY space, name;
