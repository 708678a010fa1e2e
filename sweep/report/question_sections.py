"""The report sections of three questions, as they stood in ``sweep/report.py``: control arms
(``mlp_control``), a parameter budget spent three ways (``budget_ways``, ``budget_pairs``) and conditioning
interventions (``conditioning_effect``, ``conditioning_vs_heads``). They move into ``sweep/questions/`` (one
module per question); until then the report calls them from :func:`sweep.report.topic_sections`."""

from __future__ import annotations

from sweep.metrics import format_delta, format_score
from sweep.report.data import query
from sweep.report.headline import Headline
from sweep.report.shapes import shape_words
from sweep.report.tables import markdown_table
from sweep.text import plural

# --- control arms (`controls:` blocks; view mlp_control) ---------------------------------------------------------


def delta_words(row: dict, name: str) -> str:
    """``+0.4 (95% CI -0.1…+0.9)``, or ``+0.4 (single seed: no interval)``."""
    return interval_words(row, "delta", name, single="single seed: no interval")


def control_words(row: dict, name: str) -> str:
    """``the half_mlp control (12 blocks × 12 heads of 64, MLP 1536; 58,237,672 params; 81.2% over 3 seeds)``."""
    return (
        f"the {row['control']} control ({row['control_depth']} blocks × {row['control_num_heads']} heads of "
        f"{row['control_head_dim']}, MLP {row['control_mlp_dim']}; {row['control_params']:,} params; "
        f"{format_score(row['control_score'], name)} over {plural(row['control_n_seeds'], 'seed')})"
    )


def control_reading(row: dict) -> str:
    """What a best-at-or-under verdict says about the trade, honest about one seed and open intervals."""
    if row["evidence"] == "single seed":
        return (
            f"On a single seed this is '{row['verdict']}' on the point estimate alone, never significant: run more "
            "seeds before crediting either side."
        )
    return {
        "wins": "Extra heads beat the control at no more parameters, with 95% confidence.",
        "loses": "The control wins: halving the MLP is the better way to save these parameters here.",
        "tie (within tolerance)": "A tie within the tolerance: extra heads do no better than the control.",
    }.get(row["verdict"], "Inconclusive: the interval reaches past the tolerance; more seeds would settle it.")


def control_section(configs: list[dict], rows: list[dict], headline: Headline) -> str:
    """Do fewer blocks with more heads beat the space's control arms (``mlp_control``) at matched parameters?"""
    labels = sorted({c["control"] for c in configs if c.get("control")})
    if not labels:
        return ""
    lines = ["\n## Fewer layers, more heads, against the control arms\n"]
    for label in labels:
        mine = [r for r in rows if r["control"] == label]
        if not mine:
            lines.append(f"- **{label}**: no finished comparison yet (the control, or every config with fewer "
                         "blocks than the baseline, has no finished seed).")  # fmt: skip
            continue
        more = [r for r in mine if r["more_heads"]]
        matched = [r for r in more if r["matched"]]
        judged = [r for r in matched if r["evidence"] != "single seed"]  # a single seed's verdict is a lean only
        single = len(matched) - len(judged)
        tally = ", ".join(
            f"{sum(r['verdict'] == v for r in judged) + (single if v == 'inconclusive' else 0)} {v}"
            for v in ("wins", "loses", "tie (within tolerance)", "inconclusive")
        )
        text = f"- **{label}**: against {control_words(mine[0], headline.name)}. "
        best = next((r for r in mine if r["best_at_or_under"]), None)
        if best is None:
            text += (
                "No config with fewer blocks and more heads than the baseline has at most the control's parameters, "
                "so none can be credited against it at matched parameters."
            )
        else:
            match = "within ±5%: matched" if best["matched"] else "not within ±5%: not matched"
            text += (
                f"The best config with fewer blocks and more heads at or under its parameters is {shape_words(best)} "
                f"({best['params']:,} params, {best['params_ratio']:.3f}× the control's, {match}): "
                f"{best['verdict']}, Δ {delta_words(best, headline.name)}. {control_reading(best)}"
            )
        top = max(matched, key=lambda r: (r["gain"], -r["params"]), default=None)
        if top is not None and (best is None or not best["matched"]):
            text += (
                f" At matched parameters the best is {shape_words(top)} ({top['params_ratio']:.3f}× the control's): "
                f"{top['verdict']}, Δ {delta_words(top, headline.name)}."
            )
        if matched:
            text += (
                f" Of {len(matched)} fewer-blocks, more-heads configs within ±5% of its parameters: {tally}"
                + (f" ({single} of the inconclusive on a single seed: a lean only)" if single else "")
                + "."
            )
        else:
            text += " No fewer-blocks, more-heads config is within ±5% of its parameters: none is a matched comparison."
        lines.append(text)
    lines.append(f'\nEvery pairing: `sweep sql "FROM mlp_control"` (tolerance {headline.tolerance} {headline.unit}).\n')
    return "\n".join(lines)


# --- a parameter budget spent three ways (`budget:` blocks; views budget_ways and budget_pairs) ---------------

WAY_WORDS = {"base": "the base", "deeper": "deeper", "wider": "wider", "more_heads": "more heads"}


BUDGET_WAY_COLUMNS = ["budget_way", "depth", "num_heads", "head_dim", "embed_dim", "mlp_dim", "attn_dim", "n_seeds",
                      "score_mean", "score_lo", "score_hi", "params", "params_miss", "flops_per_sample",
                      "train_samples_per_s", "infer_samples_per_s", "kappa_mean"]  # fmt: skip


BUDGET_PAIR_COLUMNS = ["way_a", "way_b", "n_a", "n_b", "delta", "delta_lo", "delta_hi", "params_ratio", "verdict",
                       "evidence"]  # fmt: skip


def budget_section(con, space: str, headline: Headline) -> str:
    """Which way spent the budget best: a paragraph per budget (target), then its ways and pairs as tables."""
    key = (space, headline.name)
    ways = query(con, "FROM budget_ways WHERE space = ? AND metric = ?", *key)
    if not ways:
        return ""
    pairs = query(con, "FROM budget_pairs WHERE space = ? AND metric = ?", *key)
    lines = ["\n## Which way spent the parameter budget best?\n"]
    for group in sorted({(w["family"], w["target_params"]) for w in ways}, key=str):
        in_group = [w for w in ways if (w["family"], w["target_params"]) == group]
        compared = [p for p in pairs if (p["family"], p["target_params"]) == group]
        lines.append(budget_paragraph(in_group, compared, headline, space))
        lines.append(markdown_table(in_group, BUDGET_WAY_COLUMNS))
        lines.append(markdown_table(compared, BUDGET_PAIR_COLUMNS))
    lines.append(
        "`params_miss` is params / target − 1; Δ is way a's mean minus way b's, with its Welch 95% interval. "
        'Every number: `sweep sql "FROM budget_ways"`, `sweep sql "FROM budget_pairs"`.\n'
    )
    return "\n".join(lines)


def budget_paragraph(ways: list[dict], pairs: list[dict], headline: Headline, space: str) -> str:
    """The budget, each way's match and mean with its interval, the best way, and how sure that is."""
    name, target = headline.name, ways[0]["target_params"]
    spent = [w for w in ways if w["budget_way"] != "base" and w["score_mean"] is not None]
    if not spent:
        return f"No way of the {target:,}-parameter budget has a finished seed yet.\n"
    ranked = sorted(spent, key=lambda w: w["rank"])
    shown = "; ".join(way_words(w, name) for w in ranked)
    text = f"Target {target:,} parameters, spent {len(spent)} ways (best first): {shown}."
    best = ranked[0]
    against = [p for p in pairs if best["budget_way"] in (p["way_a"], p["way_b"])]
    text += " " + " ".join(pair_words(p, best["budget_way"], name) for p in against)
    single = min(w["n_seeds"] for w in spent) < 2
    wins = [p for p in against if pair_verdict(p, best["budget_way"]) == "wins" and p["significant"]]
    if single:
        text += (
            " A way rests on a single seed: no difference here is significant, and the order may be seed noise. "
            f"More seeds: `sweep rerun {space} --seeds N`."
        )
    elif against and len(wins) == len(against):
        text += f" **{WAY_WORDS[best['budget_way']]}** spent the budget best: it beats every other way by more than "
        text += f"the tolerance ({headline.tolerance} {headline.unit}), each with a 95% interval that clears it."
    else:
        text += (
            f" No way is confidently best: {WAY_WORDS[best['budget_way']]} has the best mean, but not every "
            "comparison clears the tolerance with its 95% interval."
        )
    return text + "\n"


def way_words(way: dict, name: str) -> str:
    """``deeper (4 blocks × 4 heads of 12, d_model 48, 114,778 params, -1.5%): 80.1% (95% CI 77.0%…83.2%, 5 seeds)``"""
    interval = (
        f"95% CI {format_score(way['score_lo'], name)}…{format_score(way['score_hi'], name)}, "
        f"{plural(way['n_seeds'], 'seed')}"
        if way["score_lo"] is not None
        else "one seed"
    )
    return (
        f"{WAY_WORDS.get(way['budget_way'], way['budget_way'])} ({shape_words(way)}, d_model {way['embed_dim']}, "
        f"{way['params']:,} params, {way['params_miss']:+.1%}): {format_score(way['score_mean'], name)} ({interval})"
    )


def pair_verdict(pair: dict, way: str) -> str:
    """The pair's verdict read from ``way``'s side (the view states it for way_a)."""
    if pair["way_a"] == way:
        return pair["verdict"]
    return {"wins": "loses", "loses": "wins"}.get(pair["verdict"], pair["verdict"])


def pair_words(pair: dict, way: str, name: str) -> str:
    """``Against wider: Δ +2.1 (95% CI +0.4…+3.8), wins.`` from ``way``'s side."""
    sign = 1 if pair["way_a"] == way else -1
    other = pair["way_b"] if pair["way_a"] == way else pair["way_a"]
    delta = format_delta(sign * pair["delta"], name)
    if pair["delta_lo"] is None:
        interval = pair["evidence"]
    else:
        low, high = sorted((sign * pair["delta_lo"], sign * pair["delta_hi"]))
        interval = f"95% CI {format_delta(low, name)}…{format_delta(high, name)}"
    return f"Against {WAY_WORDS.get(other, other)}: Δ {delta} ({interval}), {pair_verdict(pair, way)}."


# --- conditioning interventions (workers/conditioning.py; views conditioning_effect, conditioning_vs_heads) -----


def conditioning_section(con, space: str, headline: Headline) -> str:
    """For a space whose configs differ in ``conditioning``: one paragraph on whether conditioning alone
    reproduces what extra heads do at a shallower depth. Nothing for other spaces."""
    key = (space, headline.name)
    kinds = con.execute(
        "SELECT count(DISTINCT conditioning) FROM configs WHERE space = ? AND metric = ?", list(key)
    ).fetchone()[0]
    if kinds < 2:
        return ""
    versus = query(con, "FROM conditioning_vs_heads WHERE space = ? AND metric = ? ORDER BY depth, conditioning", *key)
    effects = query(con, "FROM conditioning_effect WHERE space = ? AND metric = ?", *key)
    return "\n## Is conditioning what depth was buying?\n\n" + conditioning_paragraph(versus, effects, headline) + "\n"


def interval_words(row: dict, field: str, name: str, single: str = "single seed") -> str:
    """``row[field]`` with its interval (``field_lo``, ``field_hi``): ``+1.2 (95% CI -0.3…+2.7)``, or
    ``+1.2 (single seed)`` (``single`` says it) where there is no interval."""
    value, lo, hi = row[field], row[f"{field}_lo"], row[f"{field}_hi"]
    if lo is None or hi is None:
        return f"{format_delta(value, name)} ({single})"
    return f"{format_delta(value, name)} (95% CI {format_delta(lo, name)}…{format_delta(hi, name)})"


def effect_for(row: dict, effects: list[dict]) -> dict | None:
    """The ``conditioning_effect`` row of a ``conditioning_vs_heads`` row's shallow shape and intervention."""
    key = ("depth", "num_heads", "head_dim", "conditioning")
    return next((e for e in effects if all(e[k] == row[k] for k in key)), None)


def kappa_words(row: dict, effects: list[dict]) -> str:
    """How far the intervention moved κ at that shape: the ratio with its interval, from conditioning_effect."""
    e = effect_for(row, effects)
    if e is None or e["kappa_ratio"] is None:
        return "κ not recorded"  # (reads "with κ not recorded")
    if e["kappa_ratio_lo"] is None:
        return f"κ ×{e['kappa_ratio']:.3g} (single seed)"
    moved = "moved" if e["kappa_moved"] else "not shown to move"
    return f"κ ×{e['kappa_ratio']:.3g} (95% CI ×{e['kappa_ratio_lo']:.3g}…×{e['kappa_ratio_hi']:.3g}, {moved})"


def conditioning_paragraph(versus: list[dict], effects: list[dict], headline: Headline) -> str:
    """The answer from ``conditioning_vs_heads`` (and κ from ``conditioning_effect``), in words, with the
    intervals; says so when a figure rests on a single seed and when a verdict is open."""
    if not versus:
        return (
            "This space varies the conditioning intervention, but has no config below the baseline's depth at "
            "its heads with both `none` and an intervention, so the question cannot be answered here "
            '(`sweep sql "FROM conditioning_effect"` still compares each intervention with `none`).'
        )
    name, sentences = headline.name, []
    for depth in sorted({r["depth"] for r in versus}):
        rows = [r for r in versus if r["depth"] == depth]
        first = rows[0]
        text = (
            f"At depth {depth} (baseline {first['baseline_depth']} blocks × {first['num_heads']} heads of "
            f"{first['head_dim']}), the missing depth costs {interval_words(first, 'gap', name)} "
            f"{headline.unit} of {headline.label} (signed so that positive is better)."
        )
        if first["heads_score"] is not None:
            text += (
                f" The best more-heads config ({first['heads_num_heads']} heads of {first['heads_head_dim']}) "
                f"recovers {interval_words(first, 'heads_recovery', name)}; "
                f"verdict: {first['heads_verdict']}."
            )
        for r in rows:
            text += (
                f" `{r['conditioning']}`, with {kappa_words(r, effects)}, recovers "
                f"{interval_words(r, 'conditioning_recovery', name)}; "
                f"verdict: {r['verdict']}."
            )
        sentences.append(text)
    conclusion = conditioning_conclusion(versus) + against_heads(versus, headline)
    return " ".join(sentences) + " " + conclusion + kappa_mechanism(versus, effects)


def against_heads(versus: list[dict], headline: Headline) -> str:
    """Each intervention against the best more-heads config at its depth (``as_much_as_heads``): which
    recover confidently as much as heads (within tolerance), which confidently less."""
    text = ""
    kinds = ((True, "as much as more heads do (within the tolerance)"), (False, "less than more heads do"))
    for verdict, words in kinds:
        rows = [r for r in versus if r["as_much_as_heads"] is verdict]
        if rows:
            figures = "; ".join(
                f"`{r['conditioning']}` at depth {r['depth']} {interval_words(r, 'cond_minus_heads', headline.name)}"
                for r in rows
            )
            text += f" Confidently {words}, intervention − best more heads: {figures}."
    return text


def kappa_mechanism(versus: list[dict], effects: list[dict]) -> str:
    """Whether score followed κ across the interventions (95% intervals only): κ moved with no recovery
    shown, or a recovery with κ not shown to move, both say κ is not what the score follows here."""
    moved_idle, gained_still = [], []
    for r in versus:
        e = effect_for(r, effects)
        if r["evidence"] == "single seed" or e is None or e["kappa_moved"] is None:
            continue
        recovered = r["conditioning_recovery_lo"] is not None and r["conditioning_recovery_lo"] > 0
        held_zero = r["conditioning_recovery_lo"] <= 0 <= r["conditioning_recovery_hi"]
        if e["kappa_moved"] and e["kappa_ratio"] < 1 and held_zero:
            moved_idle.append(f"`{r['conditioning']}` (depth {r['depth']}: κ ×{e['kappa_ratio']:.3g})")
        if recovered and not e["kappa_moved"]:
            gained_still.append(f"`{r['conditioning']}` (depth {r['depth']})")
    text = ""
    if moved_idle:
        text += f" Lowering κ alone bought no score here: {', '.join(moved_idle)} lowered κ with no recovery shown."
    if gained_still:
        text += (
            f" {', '.join(gained_still)} recovered score with κ not shown to move: that gain does not come "
            "through κ as measured."
        )
    return text


def conditioning_conclusion(versus: list[dict]) -> str:
    """One sentence: does conditioning alone reproduce the heads' effect on this task?"""
    seeded = [r for r in versus if r["evidence"] != "single seed"]
    space = versus[0]["space"]
    more_seeds = f"`sweep rerun {space} --seeds 3`"
    if not seeded:
        closes = [r for r in versus if r["verdict"].startswith("closes the gap")]
        return "On single seeds nothing here is significant: " + (
            f"{', '.join(sorted({'`' + r['conditioning'] + '`' for r in closes}))} came within the tolerance "
            f"of the baseline on point values only; add seeds to judge ({more_seeds})."
            if closes
            else f"no intervention came within the tolerance of the baseline; add seeds to judge ({more_seeds})."
        )
    closes = [r for r in seeded if r["verdict"] == "closes the gap"]
    narrows = [r for r in seeded if r["verdict"] == "narrows the gap, does not close it"]
    heads_close = [r for r in seeded if r["heads_verdict"] == "closes the gap"]
    names = lambda rows: ", ".join(sorted({f"`{r['conditioning']}`" for r in rows}))  # noqa: E731
    if closes:
        return (
            f"So on this task conditioning alone reproduces the heads' effect: {names(closes)} closes the gap "
            f"at the baseline's heads{' as more heads do' if heads_close else ''} (95% intervals)."
        )
    if narrows:
        return (
            f"So on this task conditioning reproduces part of the heads' effect: {names(narrows)} narrows the gap "
            f"without closing it{', where more heads close it' if heads_close else ''} (95% intervals)."
        )
    if all(r["verdict"] in ("no recovery: the gap stays", "widens the gap") for r in seeded):
        return (
            "So on this task conditioning alone does not reproduce the heads' effect: no intervention recovers "
            f"any of the gap{' that more heads close' if heads_close else ''} (95% intervals)."
        )
    if all(r["as_much_as_heads"] is False for r in seeded):
        return (
            "So on this task conditioning alone does not reproduce what the heads do: whether an intervention "
            "closes the gap to the baseline is still open (the intervals allow both), but none recovers as much "
            "as more heads."
        )
    return (
        "So on this task whether conditioning reproduces the heads' effect is open: the intervals allow both "
        f"(more seeds narrow them: `sweep rerun {space} --seeds 5`)."
    )
