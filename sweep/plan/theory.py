"""Theorem 3.2 beside a space: which parametrisation the space uses and what the bound predicts for it.

The theorem (Saratchandran, Teney, Lucey 2025, arXiv 2505.20802): for h heads of head size d with i.i.d.
Gaussian entries, the attention block A = [A_1 … A_h] ∈ R^{N×D}, D = h·d, has κ(A) ≈ (√D + √N)/(√D − √N)
when D ≫ N, so κ → 1 as heads are added *at fixed d*. What it predicts depends on how a space ties heads to
widths:

- **fixed head_dim** (rule ``fixed_head_dim``): D = h·d grows with heads, so the bound falls towards 1, but
  only where D > N; while D < N the same Gaussian law (the Marchenko–Pastur edges, read for a tall matrix)
  gives κ ≈ (√N + √D)/(√N − √D), which *grows* with D until D reaches N. The theorem's formula is then
  infinite or negative and does not apply.
- **fixed d_model** (rules ``fixed_d_model``, ``floor_d_model``): D = d_model (or just under it) whatever the
  heads, so the bound is one number for every head count: it predicts no effect of heads at all. Any trend
  of κ with heads there comes from what the heads learn, not from the theorem.

:func:`theory_rows` gives, per (heads, head_dim), D, N, the regime, the theorem's value where it applies
(None where D ≤ N, never a number that does not apply), and the Gaussian edges' value in either regime;
:func:`prediction` says it in one paragraph.
"""

from __future__ import annotations

from collections.abc import Iterable

from workers.probes.gaussian import gaussian_edges_kappa, theorem_kappa

# D/N at and above which the theorem's D ≫ N reading is taken as met (its estimate is then within ~5% of
# sampled Gaussian heads: tests/workers/probes/test_kappa.py)
WIDE_RATIO = 10

FIXED_D_MODEL = "fixed d_model"
FIXED_HEAD_DIM = "fixed head_dim"
RULE_PARAMETRISATION = {
    "fixed_d_model": FIXED_D_MODEL,
    "floor_d_model": FIXED_D_MODEL,
    "fixed_head_dim": FIXED_HEAD_DIM,
}


def regime(n_tokens: int, width: int) -> str:
    """Where D = ``width`` sits against N = ``n_tokens`` for the theorem."""
    if width >= WIDE_RATIO * n_tokens:
        return "D >> N"
    if width > n_tokens:
        return "D > N (theorem loose)"
    if width == n_tokens:
        return "D = N (κ unbounded)"
    return "D < N (theorem does not apply)"


def theory_row(heads: int, head_dim: int, n_tokens: int) -> dict:
    """D, N and what the Gaussian law says for ``heads`` heads of ``head_dim`` over ``n_tokens`` tokens.

    ``kappa_theorem``: Theorem 3.2's (√D+√N)/(√D−√N) where D > N, else None (it does not apply there).
    ``kappa_gaussian``: the Marchenko–Pastur edges' ratio, (√max + √min)/|√D − √N|, in either regime (inf
    at D = N)."""
    width = heads * head_dim
    theorem = theorem_kappa(n_tokens, width)
    return {
        "heads": heads,
        "head_dim": head_dim,
        "width_D": width,
        "tokens_N": n_tokens,
        "D_over_N": round(width / n_tokens, 3),
        "regime": regime(n_tokens, width),
        "kappa_theorem": theorem if width > n_tokens else None,
        "kappa_gaussian": gaussian_edges_kappa(n_tokens, width),
    }


def theory_rows(shapes: Iterable[tuple[int, int]], n_tokens: int) -> list[dict]:
    """:func:`theory_row` of each distinct (heads, head_dim), by heads then head_dim."""
    return [theory_row(heads, head_dim, n_tokens) for heads, head_dim in sorted(set(shapes))]


def parametrisations(rules: Iterable[str | None]) -> list[str]:
    """The parametrisations a space's head_dim rules name (``fixed_d_model+fixed_head_dim`` names both), in
    the order :data:`RULE_PARAMETRISATION` lists them."""
    named = {part for rule in rules if rule for part in rule.split("+")}
    found = [RULE_PARAMETRISATION[rule] for rule in RULE_PARAMETRISATION if rule in named]
    return list(dict.fromkeys(found))


def prediction(parametrisation: str, rows: list[dict]) -> str:
    """One paragraph: what Theorem 3.2 predicts for configs of one parametrisation (``rows`` from
    :func:`theory_rows`), the D < N case said as such."""
    if not rows:
        return ""
    n_tokens = rows[0]["tokens_N"]
    widths = sorted({row["width_D"] for row in rows})
    narrow = [row for row in rows if row["width_D"] <= n_tokens]
    wide = [row for row in rows if row["width_D"] > n_tokens]
    if parametrisation == FIXED_D_MODEL:
        words = (
            f"With d_model fixed, D = heads × head_dim is {join(widths)} whatever the heads, so Theorem 3.2's "
            "bound is one number for every head count: it predicts no effect of heads on κ."
        )
        if len(widths) > 1:
            words = (
                f"With d_model fixed, D = heads × head_dim stays at its d_model (D = {join(widths)} across the "
                "space's widths) whatever the heads, so at each width Theorem 3.2's bound is one number for every "
                "head count: it predicts no effect of heads on κ."
            )
    else:
        words = (
            f"With head_dim fixed, D = heads × head_dim grows with heads ({join(widths)}), and Theorem 3.2 "
            "predicts κ falling towards 1 as heads are added, where D > N."
        )
    if wide:
        bounds = ", ".join(f"D = {r['width_D']}: {r['kappa_theorem']:.3g}" for r in dedupe_widths(wide))
        words += f" With N = {n_tokens} tokens its bound is {bounds}."
    if narrow:
        gaussian = ", ".join(f"D = {r['width_D']}: {r['kappa_gaussian']:.3g}" for r in dedupe_widths(narrow))
        words += (
            f" Where D ≤ N = {n_tokens} the theorem does not apply (its formula is infinite at D = N and negative "
            f"below): Gaussian heads then have κ ≈ (√N + √D)/(√N − √D) ({gaussian}), which grows with D until D "
            "reaches N"
            + (
                ", so adding heads makes Gaussian κ worse there, not better."
                if parametrisation == FIXED_HEAD_DIM
                else "."
            )
        )
    return words


def dedupe_widths(rows: list[dict]) -> list[dict]:
    return list({row["width_D"]: row for row in rows}.values())


def join(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)
