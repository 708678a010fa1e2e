"""``sweep kappa-theory``: Theorem 3.2's κ bound beside a space's shapes or given sizes, with sampled κ."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from sweep.errors import UsageError

if TYPE_CHECKING:
    pass
from sweep.cli.results import render
from sweep.cli.run import load_plan


def parse_int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{option} takes comma-separated whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError(f"{option} needs positive whole numbers, got {text!r}")
    return values


def cmd_kappa_theory(args) -> int:
    from sweep.plan import theory

    if sum(x is not None for x in (args.width, args.head_dim, args.space)) != 1:
        raise UsageError(
            "give exactly one of --space SPACE (its own shapes), --width D (fixed total width) or --head-dim d "
            "(fixed head size)"
        )
    if args.space is not None:
        groups = space_theory_groups(args)
    else:
        if args.tokens is None:
            raise UsageError("--tokens N is needed with --width or --head-dim (with --space the space gives it)")
        if min(args.tokens, args.width or 1, args.head_dim or 1) < 1:
            raise UsageError(
                f"--tokens, --width and --head-dim must be positive whole numbers, got --tokens {args.tokens}"
                + (f" --width {args.width}" if args.width is not None else f" --head-dim {args.head_dim}")
            )
        heads = parse_int_list(args.heads, "--heads")
        if args.width is not None:
            shapes = [(h, args.width // h) for h in heads if args.width % h == 0]
            groups = [(theory.FIXED_D_MODEL, f"fixed total width D = {args.width}", shapes, args.tokens)]
        else:
            shapes = [(h, args.head_dim) for h in heads]
            groups = [(theory.FIXED_HEAD_DIM, f"fixed head size d = {args.head_dim}", shapes, args.tokens)]
    columns = [*KAPPA_THEORY_COLUMNS, *(["parametrisation"] if args.format != "table" else [])]
    everything = []
    for parametrisation, title, shapes, n_tokens in groups:
        rows = theory.theory_rows(shapes, n_tokens)
        for row in rows:
            sample_kappa(row, args.samples)
        table = [tuple(row[c] for c in KAPPA_THEORY_COLUMNS) for row in rows]
        if args.format == "table":
            print(f"{title}: {parametrisation}, N = {n_tokens} tokens")
            print(textwrap.fill(theory.prediction(parametrisation, rows), width=110))
            print(
                f"κ of A = [A_1 … A_h], i.i.d. N(0,1) heads, {args.samples} samples each; kappa_theorem: "
                "Theorem 3.2's (√D+√N)/(√D−√N), only where D > N; kappa_gaussian: the Marchenko–Pastur edges, "
                "either regime"
            )
            print(render(columns, table, "table") + "\n")
        else:
            everything += [(*row, parametrisation) for row in table]
    if args.format != "table":
        print(render(columns, everything, args.format))
    return 0


KAPPA_THEORY_COLUMNS = [
    "heads",
    "head_dim",
    "width_D",
    "tokens_N",
    "D_over_N",
    "kappa_sampled_median",
    "kappa_min",
    "kappa_max",
    "kappa_theorem",
    "kappa_gaussian",
    "sampled_over_theorem",
    "regime",
]


def sample_kappa(row: dict, samples: int) -> None:
    """Add the sampled κ of Gaussian heads of ``row``'s shape (median, min, max) and its ratio to the theorem."""
    from workers.probes.kappa import gaussian_heads_kappa

    kappas = sorted(gaussian_heads_kappa(row["tokens_N"], row["head_dim"], row["heads"], samples=samples, seed=0))
    theorem = row["kappa_theorem"]
    row.update(
        kappa_sampled_median=kappas[len(kappas) // 2],
        kappa_min=kappas[0],
        kappa_max=kappas[-1],
        sampled_over_theorem=round(kappas[len(kappas) // 2] / theorem, 3) if theorem else None,
    )


def space_theory_groups(args) -> list[tuple[str, str, list[tuple[int, int]], int]]:
    """Per parametrisation the space's configs follow (its head_dim rules, read through the plan): the
    distinct (heads, head_dim) of those configs and N, tokens per sample the family's attention sees."""
    from sweep.plan import theory
    from workers.config import ModelSpec
    from workers.models import num_tokens

    plan = load_plan(args)
    label = f"space {plan.space_name}" + (f" (profile {plan.profile})" if plan.profile else "")
    groups = []
    for parametrisation in theory.parametrisations(c.shape.rule for c in plan.configs):
        configs = [c for c in plan.configs if parametrisation in theory.parametrisations([c.shape.rule])]
        tokens = {num_tokens(ModelSpec(**c.model)) for c in configs}
        if len(tokens) > 1:
            raise UsageError(f"{label}: its configs see different token counts {sorted(tokens)}; give --tokens")
        shapes = [(c.shape.num_heads, c.shape.head_dim) for c in configs]
        groups.append((parametrisation, label, shapes, args.tokens or tokens.pop()))
    return groups
