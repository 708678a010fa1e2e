-- κ of the attention block against heads and against the score.

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
           t.head_dim_rule/*@axes t.*/, t.seed, t.metric, t.score, l.attention, l.layer, l.kappa, l.kappa_max
    FROM last_probe l JOIN trials t USING (trial_id)
    WHERE l.epoch = l.last_epoch AND t.status = 'ok'
)
SELECT space, family, depth, num_heads, head_dim, embed_dim, attn_dim/*@axes*/,
       any_value(head_dim_rule) AS head_dim_rule,
       attention, layer, count(DISTINCT seed) AS n_seeds,
       median(kappa) AS kappa_median, avg(kappa) AS kappa_mean, max(kappa_max) AS kappa_max,
       metric, avg(score) AS score_mean
FROM final_kappa
GROUP BY GROUPING SETS (
    (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim/*@axes*/, attention, layer),
    (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim/*@axes*/, attention),
    (space, metric, family, depth, num_heads, head_dim, embed_dim, attn_dim/*@axes*/))
ORDER BY space, family, depth, num_heads, head_dim, attn_dim/*@axes-order*/, attention NULLS LAST,
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
