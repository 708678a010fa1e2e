"""The answer in words: the first paragraph a reader can quote (counts, the leanest hold, the depths that
break, what did not learn, the rerun that settles what is open), how a config was judged, and the edges along
depth and along head_dim, one sentence per group."""

from __future__ import annotations

import dataclasses

from sweep.analysis.hints import Hints
from sweep.analysis.report.data import ReportData
from sweep.headline import Headline, direction_words, format_delta, format_score
from sweep.text import heads_per_kv_head, heads_words, kv_words, plural, shape_words


def describe_verdict(row: dict) -> str:
    """``holds (Δ -0.3, 95% CI -0.8…+0.2)``: Δ in the metric's units, config minus baseline. A single seed is
    ``inconclusive (single seed; Δ -0.3 leans holds)``: never a verdict."""
    metric = row["metric"]
    if row["is_baseline"]:
        return f"{format_score(row['score_mean'], metric)} (the baseline)"
    delta = format_delta(row["delta"], metric)
    if row["evidence"] == "single seed":
        return f"{row['verdict']} (single seed; Δ {delta} leans {row['point_verdict']})"
    if row["delta_lo"] is None or row["evidence"] == "baseline at chance":
        return f"{row['verdict']} (Δ {delta}, {row['evidence']})"
    interval = f"{format_delta(row['delta_lo'], metric)}…{format_delta(row['delta_hi'], metric)}"
    return f"{row['verdict']} (Δ {delta}, 95% CI {interval})"


def edge_sentence(label: str, axis: str, held, broke, tried: list, rows: list[dict]) -> str:
    """One line: the conclusion along one axis for one group, then every point tried with its verdict.

    The edge holds contiguously from the largest value tried (the baseline's side) down to ``held``;
    below it the first break is named, or else each remaining value with its own verdict, so a value
    that holds below an inconclusive one is not hidden. The baseline's own point is the reference: it is
    listed, never counted as a hold."""
    judged = [r for r in rows if not r["is_baseline"]]
    top = max(judged, key=lambda r: r[axis]) if judged else None
    tried = [r[axis] for r in judged] or tried
    if held is None and top is not None and top["verdict"] == "breaks":
        conclusion = f"breaks already at {axis} {top[axis]}"
    elif held is None:
        conclusion = f"no edge: {axis} {top[axis]} is {top['verdict']}" if top else "only the baseline was tried"
    elif held == min(tried):
        conclusion = f"holds down to {axis} {held}, the smallest tried: nothing broke in this range"
    else:
        conclusion = f"holds down to {axis} {held}"
    cutoff = held if held is not None else (top[axis] if top else None)
    below = sorted((r for r in judged if cutoff is not None and r[axis] < cutoff), key=lambda r: -r[axis])
    if broke is not None and not (held is None and top is not None and broke == top[axis]):
        conclusion += f"; breaks at {axis} {broke}"
    elif below:
        conclusion += "; below it " + ", ".join(f"{axis} {r[axis]} {r['verdict']}" for r in below)
        if any(r["verdict"] == "inconclusive" for r in below):
            conclusion += " (more seeds would settle what is inconclusive)"
    points = "; ".join(f"{axis} {r[axis]}: {describe_verdict(r)}" for r in sorted(rows, key=lambda r: -r[axis]))
    return f"- **{label}**: {conclusion}.  \n  {points}"


def family_prefix(edge: dict, edges: list[dict]) -> str:
    """``nystromformer, `` when the space runs several model families side by side, else nothing."""
    return f"{edge['family']}, " if len({e["family"] for e in edges}) > 1 else ""


def depth_sentences(edges: list[dict], verdicts: list[dict]) -> list[str]:
    sentences = []
    for edge in edges:
        rows = [v for v in verdicts if (v["family"], v["num_heads"], v["head_dim"], v["embed_dim"], v["mlp_dim"])
                == (edge["family"], edge["num_heads"], edge["head_dim"], edge["embed_dim"], edge["mlp_dim"])
                and v.get("num_kv_heads") == edge.get("num_kv_heads")
                and v["depth"] <= v["baseline_depth"]]  # fmt: skip
        label = f"{family_prefix(edge, edges)}{heads_words(edge['num_heads'])} of {edge['head_dim']}{kv_words(edge)}"
        sentences.append(
            edge_sentence(
                label, "depth", edge["holds_down_to_depth"], edge["breaks_at_depth"], edge["depths_tried"], rows
            )
        )
    return sentences


def head_dim_sentences(edges: list[dict], verdicts: list[dict]) -> list[str]:
    sentences = []
    for edge in edges:
        rows = [v for v in verdicts if (v["family"], v["depth"], v["embed_dim"], v["mlp_dim"])
                == (edge["family"], edge["depth"], edge["embed_dim"], edge["mlp_dim"])
                and heads_per_kv_head(v) == edge.get("heads_per_kv_head", 1)
                and v["attn_dim"] == v["embed_dim"] and v["head_dim"] <= v["baseline_head_dim"]]  # fmt: skip
        sharing = edge.get("heads_per_kv_head", 1)
        grouped = f", {sharing} query heads per key/value head" if sharing != 1 else ""
        label = f"{family_prefix(edge, edges)}depth {edge['depth']} (d_model {edge['embed_dim']}{grouped})"
        sentences.append(
            edge_sentence(
                label,
                "head_dim",
                edge["holds_down_to_head_dim"],
                edge["breaks_at_head_dim"],
                edge["head_dims_tried"],
                rows,
            )
        )
    return sentences


def answer_paragraph(
    headline: Headline,
    verdicts: list[dict],
    hints: Hints,
    unlearned: list[dict] | None = None,
) -> str:
    """The report's first paragraph, one a reader can quote: how many configs hold and break with
    confidence (exactly ``vs_baseline``'s holds and breaks: significant, never the baseline, never a single
    seed), the leanest config that holds and the depths at which every config breaks, each with its Δ and
    95% interval; a baseline or config at chance and a seed that failed to learn while its siblings did
    (``unlearned``: rows of ``unlearned_seeds``); what is still open and the rerun the adaptive rule
    expects to settle it, or why more seeds will not (``hints``: the commands it prints)."""
    if not verdicts:
        return (
            "No verdicts: the results hold no baseline row for this space, so nothing can be judged against it. "
            "Run the baseline config, or mark its rows with `is_baseline` when importing.\n"
        )
    judged = [v for v in verdicts if not v["is_baseline"]]
    holds = [v for v in judged if v["verdict"] == "holds"]
    breaks = [v for v in judged if v["verdict"] == "breaks"]
    open_ = [v for v in judged if v["verdict"] == "inconclusive"]
    single = sum(v["evidence"] == "single seed" for v in open_)
    on_one = f" ({single} of them on a single seed, which is never a verdict)" if single else ""
    sentences = [
        f"Of {plural(len(judged), 'config')} judged against the baseline on {headline.label} (tolerance "
        f"{headline.tolerance} {headline.unit}), {len(holds)} hold and {len(breaks)} break with 95% confidence; "
        f"{len(open_)} {'is' if len(open_) == 1 else 'are'} open{on_one}."
    ]
    sentences += chance_sentences(verdicts, unlearned or [], headline, hints)
    if holds:
        sentences.append(f"The leanest that holds is {leanest_words(holds)}.")
    for depth in sorted({v["depth"] for v in breaks}):
        at_depth = [v for v in judged if v["depth"] == depth]
        if all(v in breaks for v in at_depth):
            deltas = sorted(v["delta"] for v in at_depth)
            span = format_delta(deltas[0], headline.name) + (
                f" to {format_delta(deltas[-1], headline.name)}" if len(deltas) > 1 else ""
            )
            sentences.append(
                f"Every config with {plural(depth, 'block')} breaks, whatever its heads "
                f"({len(at_depth)} tried; Δ {span})."
            )
    sentences += rerun_sentences(verdicts, hints)
    return " ".join(sentences) + "\n"


def leanest_words(holds: list[dict]) -> str:
    """``2 blocks × 16 heads of 4: holds (Δ +0.0, 95% CI -0.4…+0.5), with 45% fewer parameters than the
    baseline``: the config of fewest parameters among ``holds`` (then the shallowest)."""
    lean = min(holds, key=lambda v: (v["params"] or 0, v["depth"]))
    change = lean["delta_params_pct"] or 0.0
    size = f"{abs(change):.0f}% {'fewer' if change < 0 else 'more'} parameters than the baseline"
    if abs(change) < 0.5:
        size = "as many parameters as the baseline"
    return f"{shape_words(lean)}: {describe_verdict(lean)}, with {size}"


def chance_sentences(verdicts: list[dict], unlearned: list[dict], headline: Headline, hints: Hints) -> list[str]:
    """What did not learn: a baseline at chance (no verdict rests on it), configs at chance, and seeds at
    chance whose siblings learned (``vs_baseline.at_chance`` and friends, ``unlearned_seeds``)."""
    name, sentences = headline.name, []
    for base in (v for v in verdicts if v["is_baseline"] and v.get("at_chance")):
        sentences.append(
            f"The baseline ({shape_words(base)}) did not learn: {format_score(base['score_mean'], name)} against a "
            f"chance level of {format_score(base['chance_score'], name)}, so no verdict rests on it and every config "
            "of its family stays open, whatever its score; more seeds will not change that (a longer training "
            "budget, or a profile whose baseline learns, will)."
        )
    stuck = [v for v in verdicts if not v["is_baseline"] and v.get("at_chance") and not v.get("baseline_at_chance")]
    if stuck:
        shown = ", ".join(f"{shape_words(v)} ({format_score(v['score_mean'], name)})" for v in stuck)
        sentences.append(
            f"At chance (chance {format_score(stuck[0]['chance_score'], name)}: {plural(len(stuck), 'config')} "
            f"learned nothing at this budget): {shown}."
        )
    if unlearned:
        shown = "; ".join(
            f"{shape_words(u)}{' (the baseline)' if u['is_baseline'] else ''}, seed {u['seed']} at "
            f"{format_score(u['score'], name)} while {plural(u['siblings_learned'], 'sibling')} reached "
            f"{format_score(u['siblings_mean'], name)}"
            for u in unlearned
        )
        sentences.append(
            f"{'A seed' if len(unlearned) == 1 else f'{len(unlearned)} seeds'} failed to learn while "
            f"{'its siblings' if len(unlearned) == 1 else 'their siblings'} did: {shown}. Each stays in its "
            "config's mean and widens its interval: a shape that learns only on some seeds is part of the answer "
            f"(`{hints.sql('FROM unlearned_seeds')}`)."
        )
    return sentences


def rerun_sentences(verdicts: list[dict], hints: Hints) -> list[str]:
    """The rerun that settles what is open: the budget the adaptive rule (``sweep/analysis/adaptive.py``) is
    expected to need; and for the open verdicts it does not expect to settle within its seeds, the true reason
    of each (a seed at chance, a wide spread, Δ on the tolerance bound) and what would settle them instead."""
    from sweep.analysis.adaptive import MAX_EXPECTED_SEEDS, expected_trials

    expected = expected_trials(verdicts)
    if not expected.open:
        return []
    sentences = []
    if expected.settles:
        command = hints.rerun(f"--select inconclusive --budget {expected.trials}")
        sentences.append(
            f"More seeds where verdicts are open: `{command}`{hints.unknown_note()} is expected to settle "
            f"{expected.settles} of {expected.open} (the adaptive rule run on today's means and spreads)."
        )
    if expected.unsettled:
        some = "The other" if expected.settles else "No open verdict is expected to settle within"
        count = f" {plural(len(expected.unsettled), 'open verdict')} would need" if expected.settles else ""
        lead = (
            f"{some}{count} more than {MAX_EXPECTED_SEEDS} seeds a config, so a rerun of more seeds is not "
            "what settles them"
            if expected.settles
            else f"{some} {MAX_EXPECTED_SEEDS} seeds a config, so no rerun of more seeds is suggested"
        )
        by_id = {v["config_id"]: v for v in verdicts}
        sentences.append(lead + ": " + "; ".join(unsettled_reasons(expected, by_id, hints)) + ".")
    return sentences


def unsettled_reasons(expected, by_id: dict[str, dict], hints: Hints) -> list[str]:
    """One clause per reason an open verdict will not settle with more seeds: its configs (Δ and interval),
    why, and what would settle them."""
    from sweep.analysis.adaptive import SEED_AT_CHANCE, WIDE_SPREAD

    groups: dict[str, list[dict]] = {}
    for config_id, why in zip(expected.unsettled, expected.why, strict=True):
        groups.setdefault(why, []).append(by_id[config_id])
    clauses = []
    for why, rows in groups.items():
        shown = "; ".join(f"{shape_words(r)}, {describe_verdict(r)}," for r in rows).rstrip(",")
        if why == SEED_AT_CHANCE:
            clauses.append(
                f"{shown} {'is' if len(rows) == 1 else 'are'} wide because a seed did not learn (at chance) while "
                "its siblings did, not because Δ sits on the tolerance bound; what settles it is a training "
                "budget at which every seed learns (more epochs or steps, a profile that trains longer), or "
                f"reading how often it learns (`{hints.sql('FROM unlearned_seeds')}`)"
            )
        elif why == WIDE_SPREAD:
            clauses.append(
                f"{shown}: its seeds spread far wider than the space's other configs (at their spread it would "
                "settle), not Δ on the bound; seeds that agree settle it (a steadier recipe: a lower learning "
                "rate, a longer warm-up)"
            )
        else:
            clauses.append(
                f"{shown}: Δ sits on the tolerance bound at its spread; only many more seeds settle it, and the "
                "verdict at the margin you care about (`--tolerance`) may be the better question"
            )
    return clauses


def verdict_rule(headline: Headline, trials: int) -> str:
    """The paragraph that says how a config was judged: metric, direction, tolerance in its units."""
    h = headline
    return (
        f"{trials} trials, judged on `{h.name}` ({h.label}, {direction_words(h.mode)}). A config **holds** when "
        f"its mean {h.label} is confidently (95% interval) no more than {h.tolerance} {h.unit} {h.worse} "
        f"the baseline's, **breaks** when it is confidently more than that {h.worse}, and is **inconclusive** "
        "otherwise. The interval is Welch's, or, with 2 seeds on a side, one on the variance pooled over the "
        "space's configs where their spreads pass the equal-variance checks (`evidence` names the method). "
        "One seed is never called significant. In the tables, `score_mean` is the mean "
        f"{h.name} over seeds and `delta` (Δ) the config's minus the baseline's, in {h.unit}.\n"
    )


def answer_section(space: str, headline: Headline, data: ReportData) -> list[str]:
    """The answer in words, how it was judged, the baseline, and the count of each verdict."""
    parts = ["## The answer\n", answer_paragraph(headline, data.verdicts, data.hints, data.unlearned)]
    parts.append(verdict_rule(headline, data.trials))
    baseline = next((c for c in data.configs if c["is_baseline"]), None)
    if baseline:
        parts.append(
            f"Baseline: {shape_words(baseline)}, {baseline['params']:,} parameters, {headline.label} "
            f"{format_score(baseline['score_mean'], headline.name)} over {plural(baseline['n_seeds'], 'seed')}.\n"
        )
    judged = [r for r in data.verdicts if not r["is_baseline"]]  # the baseline is the reference, not a verdict
    counts = {v: sum(r["verdict"] == v for r in judged) for v in ("holds", "breaks", "inconclusive")}
    single = sum(r["evidence"] == "single seed" for r in judged)
    parts.append(
        f"Verdicts of the {plural(len(judged), 'config')} besides the baseline: {counts['holds']} hold, "
        f"{counts['breaks']} break, {counts['inconclusive']} inconclusive"
        f"{f' ({single} of them on a single seed)' if single else ''}.\n"
    )
    return parts


def edges_section(headline: Headline, data: ReportData) -> list[str]:
    """Where the trade breaks along depth and along head_dim, in sentences, and the Δ heatmap."""
    parts = ["## Along depth (fewer blocks, same heads)\n"]
    parts += depth_sentences(data.depth_edges, data.verdicts) or ["_(no configs at or below the baseline depth)_"]
    parts.append("\n## Along head_dim (more, smaller heads at fixed d_model)\n")
    parts += head_dim_sentences(data.head_dim_edges, data.verdicts) or ["_(no fixed-d_model configs)_"]
    if data.verdicts:
        parts.append(f"\n![Δ{headline.name} heatmap](delta_heatmap.png)\n")
    return parts


# The views (and what they read) that the answer's headline queries.
ANSWER_READS = ("trials", "configs", "space_settings", "vs_baseline", "tune_choice")


def answer_lines(results_dir, space: str, hints: Hints) -> list[str]:
    """The answer's headline in two or three lines, for the end of ``sweep run`` and ``sweep rerun``: how many
    configs hold, break and are open, the leanest that holds, and the command that writes the report. Nothing
    when the space has no trials recorded."""
    from sweep.analysis.report.headline import find_headline
    from sweep.analysis.sql import connect_lazily
    from sweep.markdown import query

    con, views = connect_lazily(results_dir)
    views.create(["trials"])  # what the lines below read, not every view: a run's last step stays short
    # fetched whole: a result left open (fetchone) would block creating the views below on some connections
    (recorded,) = con.execute("SELECT count(*) FROM trials WHERE space = ?", [space]).fetchall()[0]
    if recorded == 0:
        return []
    views.create(ANSWER_READS)
    headline = find_headline(con, space)
    verdicts = query(con, "FROM vs_baseline WHERE space = ? AND metric = ?", space, headline.name)
    judged = [v for v in verdicts if not v["is_baseline"]]
    count = {v: sum(r["verdict"] == v for r in judged) for v in ("holds", "breaks", "inconclusive")}
    single = sum(r["evidence"] == "single seed" for r in judged)
    on_one = f" ({single} of them on a single seed)" if single else ""
    if not verdicts:
        lines = [f"answer: no verdicts: the results hold no baseline row for {space}, so nothing is judged"]
    else:
        lines = [
            f"answer on {headline.label} (tolerance {headline.tolerance} {headline.unit}): of "
            f"{plural(len(judged), 'config')} against the baseline, {count['holds']} hold, {count['breaks']} break "
            f"and {count['inconclusive']} {'is' if count['inconclusive'] == 1 else 'are'} open{on_one}"
        ]
        holds = [v for v in judged if v["verdict"] == "holds"]
        lines.append(
            f"the leanest that holds: {leanest_words(holds)}" if holds else "no config holds with 95% confidence yet"
        )
    lines.append(learning_rate_line(con, space, hints))
    lines.append(f"the report (why, edges, tables, figures): {hints.report()}")
    return lines


def learning_rate_line(con, space: str, hints: Hints) -> str:
    """One line on the learning rate the verdicts rest on: each config's, chosen on selection seeds (with how many
    were chosen at the edge of the range), or the one rate of an untuned sweep and what would tune it."""
    tuned, edges = con.execute(
        "SELECT count(*), count(edge_flag) FROM tune_choice WHERE space = ? AND tuned_verdict IS NOT NULL", [space]
    ).fetchone()
    if tuned:
        edge = f"; {plural(edges, 'config')} best at an end of the range tried (widen it)" if edges else ""
        return f"learning rate: chosen per config on selection seeds no verdict counts ({tuned} configs){edge}"
    tuning = dataclasses.replace(hints, profile="tuned")
    how = f"`{tuning.run()}`" if hints.known and has_tuned_profile(hints.space) else "a `tune:` section"
    one_rate = "learning rate: every verdict is at one rate, the space's train.lr (a break may be the recipe's)"
    return f"{one_rate}; {how} chooses each config's first"


def has_tuned_profile(space: str) -> bool:
    """Whether the space file ``space`` names (a shipped name or a path) has a profile called ``tuned``."""
    from sweep.space.loader import find_space, read_yaml

    try:
        return "tuned" in (read_yaml(find_space(space)).get("profiles") or {})
    except Exception:  # a space the results name but this machine cannot find: say nothing of its profiles
        return False
