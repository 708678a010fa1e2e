-- The known-answers question's view (sweep/questions/expectations.py; docs/known_answers.md).

-- expectations: one row per expectation (a space's `expect:` block) as the space's latest sweep recorded it
-- (space_settings.questions, the `spaces` row's JSON: its `expectations` list, each with the config id of
-- each side as the plan resolved it), judged on the space's headline metric (space_settings.metric) with
-- each side's finished seeds (configs):
--   name, claim, source, a_shape, b_shape   as the space states them (a side's shape values as text)
--   a_config, b_config   the config each side picks out (the plan checked it picks out exactly one)
--   a_mean, n_a, b_mean, n_b   each side's mean score and finished seeds (NULL and 0 when none finished)
--   expected   'a beats b' | 'b beats a' | 'no difference' (the expectation's direction)
--   tolerance  the expectation's own (`tolerance:`), in the metric's units
--   delta      mean(a) − mean(b), signed so that positive means a is better (for a `min` metric such as
--              val_loss, mean(b) − mean(a)), in the metric's units
--   delta_lo, delta_hi   its 95% Welch interval: delta ∓ t95(welch_df) · √(sd_a²/n_a + sd_b²/n_b), as
--              vs_baseline's; NULL unless both sides have ≥ 2 seeds
--   chance_score, a_at_chance, b_at_chance   the metric's chance level on the data set and whether each
--              side's mean score is at chance (configs.at_chance: it did not learn; FALSE when the level is
--              unknown)
--   must_learn which sides must have learned for the comparison to say anything about the claim: 'a' for
--              'a beats b', 'b' for 'b beats a' (the side the claim says wins: a winner that did not learn
--              is a failed training, not evidence), 'either' for 'no difference' (both at chance is no
--              evidence; one at chance is a real difference). A claim kind about chance itself ("one block
--              stays at chance", issue 41's levels) would say 'none' here and stay judgeable.
--   found      'not run' (a side has no finished seed), 'did not learn' (must_learn is not met), 'no
--              interval' (a side has one seed: a single seed is never a finding), 'a beats b' (delta_lo >
--              +tolerance), 'b beats a' (delta_hi < −tolerance), 'no difference' (−tolerance ≤ delta_lo and
--              delta_hi ≤ +tolerance), or 'unclear' (the interval straddles a bound)
--   verdict    'agrees' (found = expected), 'disagrees' (found is one of the three definite signs and not the
--              expected one), else 'inconclusive' (not run, did not learn, no interval, unclear)
CREATE OR REPLACE VIEW expectations AS
WITH claims AS (
    SELECT space, metric, unnest(from_json(json_extract(questions, '$.expectations'),
        '[{"name": "VARCHAR", "claim": "VARCHAR", "source": "VARCHAR", "expected": "VARCHAR",
           "tolerance": "DOUBLE", "a_shape": "VARCHAR", "b_shape": "VARCHAR", "a_config": "VARCHAR",
           "b_config": "VARCHAR"}]'), recursive := true),
           json_extract(questions, '$.tuning') IS NOT NULL AS tuned_sweep  -- the latest sweep chose each rate
    FROM space_settings
    WHERE questions IS NOT NULL
),
paired AS (
    SELECT e.*, a.score_mean AS a_mean, b.score_mean AS b_mean,
           coalesce(a.n_seeds, 0) AS n_a, coalesce(b.n_seeds, 0) AS n_b,
           coalesce(a.chance_score, b.chance_score) AS chance_score,
           coalesce(a.at_chance, false) AS a_at_chance, coalesce(b.at_chance, false) AS b_at_chance,
           CASE e.expected WHEN 'a beats b' THEN 'a' WHEN 'b beats a' THEN 'b' ELSE 'either' END AS must_learn,
           better_sign(coalesce(a.metric_mode, b.metric_mode)) * (a.score_mean - b.score_mean) AS delta,
           CASE WHEN a.n_seeds >= 2 AND b.n_seeds >= 2 THEN
               t95(welch_df(a.score_sd, a.n_seeds, b.score_sd, b.n_seeds))
               * sqrt(a.score_sd ^ 2 / a.n_seeds + b.score_sd ^ 2 / b.n_seeds)
           END AS half_width
    FROM claims e
    -- a side is its config's untuned rows, or (the latest sweep tuned: sweep/questions/tuning.py) its tuned verdict
    -- seeds, found by recipe_config_id (the side's untuned config id)
    LEFT JOIN configs a ON a.space = e.space AND a.metric = e.metric AND a.n_seeds > 0 AND CASE WHEN e.tuned_sweep
        THEN a.recipe_config_id = e.a_config AND a.lr_arm = 'tuned' ELSE a.config_id = e.a_config AND a.lr_arm = 'untuned' END
    LEFT JOIN configs b ON b.space = e.space AND b.metric = e.metric AND b.n_seeds > 0 AND CASE WHEN e.tuned_sweep
        THEN b.recipe_config_id = e.b_config AND b.lr_arm = 'tuned' ELSE b.config_id = e.b_config AND b.lr_arm = 'untuned' END
),
judged AS (
    SELECT *, delta - half_width AS delta_lo, delta + half_width AS delta_hi FROM paired
),
found AS (
    SELECT *, CASE
        WHEN n_a = 0 OR n_b = 0 THEN 'not run'
        WHEN (must_learn = 'a' AND a_at_chance) OR (must_learn = 'b' AND b_at_chance)
             OR (must_learn = 'either' AND a_at_chance AND b_at_chance) THEN 'did not learn'
        WHEN delta_lo IS NULL THEN 'no interval'
        WHEN delta_lo > tolerance THEN 'a beats b'
        WHEN delta_hi < -tolerance THEN 'b beats a'
        WHEN delta_lo >= -tolerance AND delta_hi <= tolerance THEN 'no difference'
        ELSE 'unclear'
    END AS found
    FROM judged
)
SELECT space, name, claim, source, metric, a_shape, b_shape, a_config, b_config, a_mean, n_a, b_mean, n_b,
       expected, tolerance, delta, delta_lo, delta_hi, chance_score, a_at_chance, b_at_chance, must_learn, found,
       CASE WHEN found = expected THEN 'agrees'
            WHEN found IN ('a beats b', 'b beats a', 'no difference') THEN 'disagrees'
            ELSE 'inconclusive' END AS verdict
FROM found
ORDER BY space, name;
