"""The question "is conditioning what depth was buying?": the ``conditioning`` axis (interventions on the
attention block's conditioning, ``workers/conditioning.py``: ``none``, ``preconditioned``, ``orthogonality``,
``kappa_penalty``). A shallower model with an intervention against the same model with more heads: does it
close the gap that extra heads close, and does κ move with the score? The axis is part of every shape (the
plan crosses it with the others; ``none`` passes nothing to the worker, so older config ids stay). Views:
``conditioning.sql`` (conditioning_effect, conditioning_vs_heads).
"""

from __future__ import annotations

from sweep.headline import Headline
from sweep.markdown import interval_words, query
from sweep.questions.base import Axis, Question

# --- the report ---------------------------------------------------------------------------------------------


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


class ConditioningQuestion(Question):
    """The ``conditioning`` axis: interventions on the attention block's conditioning."""

    name = "conditioning"
    axes = (
        Axis(
            "conditioning",
            "VARCHAR",
            "the intervention on the attention block's conditioning (workers/conditioning.py); "
            "none: the model as built",
            default="none",
            item_type=str,
            plan_after="seeds",  # after the seeds, before the other questions' columns
        ),
    )
    sql = "conditioning.sql"
    report_place = "mechanism"

    def report_section(self, con, space: str, headline: Headline, data) -> str:
        return conditioning_section(con, space, headline)


QUESTION = ConditioningQuestion()
