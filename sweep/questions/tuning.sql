-- The learning-rate search (sweep/questions/tuning.py): each config's score against learning rate on its
-- selection runs, the rate chosen from them, and the tuned verdicts beside the untuned ones.

-- lr_curve: score against learning rate per config, from the selection runs only (tune_phase = 'selection';
-- no verdict counts them). One row per (space, metric, recipe_config_id, lr):
--   recipe_config_id: the key joining a config's tuned, untuned and selection rows (its config id at the
--                     space's own train.lr); config_id: the selection runs' id at this rate
--   lr:               the rate (trials.tune_lr)
--   n_ok, n_failed:   selection runs that finished, and that did not (diverged, oom, error, pruned); a seed
--                     that finished more than once counts once, by its latest row (as in configs)
--   score_mean, score_min, score_max: over the finished selection runs, in the metric's units
CREATE OR REPLACE VIEW lr_curve AS
WITH selection AS (
    SELECT * FROM trials WHERE tune_phase = 'selection' AND status = 'ok'
    QUALIFY row_number() OVER (
        PARTITION BY space, config_id, metric, seed ORDER BY finished_at DESC NULLS LAST, trial_id DESC
    ) = 1
    UNION ALL BY NAME
    SELECT * FROM trials WHERE tune_phase = 'selection' AND status IS DISTINCT FROM 'ok'
)
SELECT space, metric, any_value(metric_mode) AS metric_mode, recipe_config_id, tune_lr AS lr,
       any_value(config_id) AS config_id, any_value(family) AS family, any_value(depth) AS depth,
       any_value(num_heads) AS num_heads, any_value(head_dim) AS head_dim, any_value(embed_dim) AS embed_dim,
       any_value(mlp_dim) AS mlp_dim, bool_or(is_baseline) AS is_baseline,
       count(DISTINCT seed) FILTER (WHERE status = 'ok') AS n_ok,
       count(*) FILTER (WHERE status <> 'ok') AS n_failed,
       avg(score) FILTER (WHERE status = 'ok') AS score_mean,
       min(score) FILTER (WHERE status = 'ok') AS score_min,
       max(score) FILTER (WHERE status = 'ok') AS score_max
FROM selection
GROUP BY space, metric, recipe_config_id, tune_lr
ORDER BY space, metric, recipe_config_id, lr;

-- tune_choice: each config's chosen rate. The rule (choose_on: score): rank its rates by failed selection runs
-- (fewest first), then score_mean in the metric's direction (best first; a rate with no finished run last),
-- then the smaller rate; the first is chosen.
--   chosen_lr, chosen_score: that rate and its selection score_mean (a selection score, never a verdict)
--   rates_tried: the config's rates in lr_curve that the latest sweep's `tune:` planned, smallest first; n_rates
--   rates_tied: how many rates rank exactly as the chosen one (1: it is strictly best; a saturated score ties)
--   edge: 'largest' or 'smallest' when the chosen rate is the largest or smallest tried (of 2+) and strictly
--         best (a tie with a rate inside the range is no sign the range is too narrow), else NULL;
--   edge_flag: 'best at the largest rate tried: widen the range' (or smallest), else NULL
--   recipe_lr: the space's own train.lr (the untuned rate), from the latest sweep's record
--   tuned_verdict, tuned_gain, tuned_gain_lo, tuned_gain_hi, tuned_seeds: vs_baseline of the config's tuned verdict
--                  seeds (lr_arm 'tuned'), against the tuned baseline; NULL before they ran
--   untuned_verdict, untuned_gain: vs_baseline of its untuned config (config_id = recipe_config_id, lr_arm
--                  'untuned'), when the same results hold an untuned sweep of it
--   tuned_words: the verdict in words: 'breaks at every rate tried; best 3e-3, Δ -12.1' (its tuned verdict
--                breaks: a break that survives tuning), 'holds once tuned: 1e-3 → 3e-3' (holds tuned, and untuned
--                did not hold: the untuned break or doubt was the recipe's), 'holds tuned, at 3e-3 (untuned, at the
--                recipe's 1e-3, not in these results)', 'holds, tuned (3e-3) and untuned', 'inconclusive once tuned (best 3e-3)', or 'baseline (best 3e-3)'
CREATE OR REPLACE VIEW tune_choice AS
WITH recipe AS (
    SELECT space, try_cast(json_extract_string(questions, '$.tuning.recipe_lr') AS DOUBLE) AS recipe_lr,
           try_cast(json_extract(questions, '$.tuning.lr') AS DOUBLE[]) AS planned_rates
    FROM space_settings
),
curve AS (  -- the rates the latest sweep's `tune:` planned (all of lr_curve's when none is recorded)
    SELECT l.* FROM lr_curve l LEFT JOIN recipe r USING (space)
    WHERE r.planned_rates IS NULL OR list_contains(r.planned_rates, l.lr)
),
ranked AS (
    SELECT *,
        row_number() OVER (
            PARTITION BY space, metric, recipe_config_id
            ORDER BY n_failed, better_sign(metric_mode) * score_mean DESC NULLS LAST, lr
        ) AS place,
        min(lr) OVER (PARTITION BY space, metric, recipe_config_id) AS lr_min,
        max(lr) OVER (PARTITION BY space, metric, recipe_config_id) AS lr_max,
        list(lr) OVER (PARTITION BY space, metric, recipe_config_id ORDER BY lr
                       ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS rates_tried,
        count(*) OVER (PARTITION BY space, metric, recipe_config_id) AS n_rates,
        -- rates that rank exactly alike (same failures, same mean score): a tie the smaller rate breaks
        count(*) OVER (PARTITION BY space, metric, recipe_config_id, n_failed, score_mean) AS n_tied
    FROM curve
),
chosen AS (
    SELECT space, metric, metric_mode, recipe_config_id, family, depth, num_heads, head_dim, embed_dim, mlp_dim,
           is_baseline, lr AS chosen_lr, score_mean AS chosen_score, rates_tried, n_rates,
           n_tied AS rates_tied,
           CASE WHEN n_tied > 1 THEN NULL
                WHEN n_rates >= 2 AND lr = lr_max THEN 'largest' WHEN n_rates >= 2 AND lr = lr_min THEN 'smallest'
           END AS edge
    FROM ranked WHERE place = 1
),
tuned AS (
    SELECT v.space, v.metric, c.recipe_config_id, v.verdict, v.gain, v.gain_lo, v.gain_hi, v.n_seeds,
           c.tune_lr AS verdict_lr
    FROM vs_baseline v JOIN configs c USING (space, metric, config_id)
    WHERE v.lr_arm = 'tuned'
),
untuned AS (
    SELECT space, metric, config_id AS recipe_config_id, verdict, gain FROM vs_baseline WHERE lr_arm = 'untuned'
)
SELECT ch.*,
       CASE edge WHEN 'largest' THEN 'best at the largest rate tried: widen the range'
                 WHEN 'smallest' THEN 'best at the smallest rate tried: widen the range' END AS edge_flag,
       r.recipe_lr,
       t.verdict AS tuned_verdict, t.gain AS tuned_gain, t.gain_lo AS tuned_gain_lo, t.gain_hi AS tuned_gain_hi,
       t.n_seeds AS tuned_seeds, u.verdict AS untuned_verdict, u.gain AS untuned_gain,
       CASE
           WHEN t.verdict IS NULL THEN NULL
           WHEN t.verdict = 'baseline' THEN printf('baseline (best %g)', ch.chosen_lr)
           WHEN t.verdict = 'breaks' THEN printf('breaks at every rate tried; best %g, Δ %+.1f', ch.chosen_lr, t.gain)
           WHEN t.verdict = 'holds' AND u.verdict = 'holds' THEN printf('holds, tuned (%g) and untuned', ch.chosen_lr)
           WHEN t.verdict = 'holds' AND u.verdict IS NULL THEN
               printf('holds tuned, at %g (untuned, at the recipe''s %g, not in these results)', ch.chosen_lr,
                      coalesce(r.recipe_lr, 'nan'::DOUBLE))
           WHEN t.verdict = 'holds' THEN printf('holds once tuned: %g → %g', coalesce(r.recipe_lr, 'nan'::DOUBLE),
                                                ch.chosen_lr)
           ELSE printf('inconclusive once tuned (best %g)', ch.chosen_lr)
       END AS tuned_words
FROM chosen ch
LEFT JOIN tuned t USING (space, metric, recipe_config_id)
LEFT JOIN untuned u USING (space, metric, recipe_config_id)
LEFT JOIN recipe r USING (space)
ORDER BY space, metric, is_baseline DESC, depth, num_heads;

-- tuned_verdicts: the tuned arm's verdicts (vs_baseline, lr_arm 'tuned') with each config's chosen rate, edge
-- flag and words (tune_choice): what `sweep sql` shows of a tuned sweep's answer.
CREATE OR REPLACE VIEW tuned_verdicts AS
SELECT v.*, c.recipe_config_id, c.tune_lr AS chosen_lr, t.edge_flag, t.tuned_words, t.untuned_verdict
FROM vs_baseline v JOIN configs c USING (space, metric, config_id)
LEFT JOIN tune_choice t ON t.space = v.space AND t.metric = v.metric AND t.recipe_config_id = c.recipe_config_id
WHERE v.lr_arm = 'tuned';
