-- Statistics macros every view uses (sweep/results/compat.sql's header says how the files fit).

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
