"""The skeleton every report shares: find the headline metric, gather the rows once (``data.py``), draw the
figures (``figures.py``), and render the sections in order: the answer and the edges (``answer.py``), the tables
(``tables.py``), the shared sections (``sections.py``) and each question's own (``sweep/questions/``)."""

from __future__ import annotations

from pathlib import Path

from sweep.analysis.hints import Hints, space_name
from sweep.analysis.report.answer import answer_paragraph, answer_section, edges_section
from sweep.analysis.report.data import ReportData, count_trials, gather, recorded_question
from sweep.analysis.report.edge import edge_section
from sweep.analysis.report.figures import draw_figures, plot_lr_curves
from sweep.analysis.report.headline import find_headline
from sweep.analysis.report.html import write_html
from sweep.analysis.report.sections import (
    KappaTraining,
    equal_cost_section,
    kappa_metric_section,
    kappa_over_training,
    kappa_training_section,
    loader_bound_section,
    theory_section,
)
from sweep.analysis.report.tables import (
    FRONT_COLUMNS,
    INFEASIBLE_COLUMNS,
    KAPPA_COLUMNS,
    VERDICT_COLUMNS,
    cost_sentence,
)
from sweep.analysis.sql import connect
from sweep.errors import UsageError
from sweep.headline import Headline
from sweep.markdown import markdown_table, query
from sweep.questions import QUESTIONS
from sweep.text import plural, with_kv


def pareto_caption(headline: Headline, count: int) -> str:
    """What the figure and the table under it show: the Pareto front on parameters, its columns' meaning."""
    return (
        f"Grey points: every finished config, {headline.label} (mean over seeds ± standard error) against "
        f"parameters; dark line and the table below: the {plural(count, 'config')} of the Pareto front, those no "
        f"other config beats on both {headline.label} and parameters (depth × heads labelled); ★ the baseline, "
        "drawn hollow over its point. `score_mean` and `score_se` are the mean and its standard error over "
        'seeds; `sweep sql "FROM pareto"` gives the table.\n'
    )


def write_report(
    space: str, results_dir: Path, out_dir: Path, question: str | None = None, tolerance: float | None = None
) -> Path:
    """Write the report folder for ``space`` (index.md, index.html and the PNGs); returns the path of index.md.
    ``space``: a name as the results record it, or the path of the space's file (its name is the file's stem;
    the commands the report prints then name the file). ``question``: None takes the one its latest sweep
    recorded (``space_settings``). ``tolerance``: judge every verdict at this tolerance (the metric's units)
    instead of the space's own."""
    given, space = space, space_name(space)
    con = connect(results_dir, tolerance=tolerance)
    trials = count_trials(con, space)
    if trials == 0:
        first = Hints.given(given, results_dir).run()
        raise UsageError(f"no trials of space {space!r} under {results_dir}; run `{first}` first")
    if question is None:
        question = recorded_question(con, space)
    headline = find_headline(con, space)
    data = gather(con, space, headline, trials)
    data.hints = Hints.given(given, results_dir, data.profile)
    training = kappa_over_training(data.kappa_epochs, data.configs)
    out_dir.mkdir(parents=True, exist_ok=True)
    draw_figures(data, training, out_dir, headline)
    draw_lr_curves(con, space, out_dir, headline)
    extra = "".join(topic_sections(con, headline, data, training))
    index = out_dir / "index.md"
    index.write_text(data.hints.carry(render_markdown(space, question, headline, data, extra=extra)))
    answer = data.hints.carry(answer_paragraph(headline, data.verdicts, data.hints, data.unlearned))  # as index.md's
    write_html(out_dir / "index.html", space, question, headline, data, answer)
    return index


def draw_lr_curves(con, space: str, out_dir: Path, headline: Headline) -> None:
    """``lr_curve.png`` for a tuned sweep (its selection runs, ``sweep/questions/tuning.sql``); nothing otherwise."""
    rows = query(
        con,
        """SELECT l.*, l.lr = t.chosen_lr AS chosen FROM lr_curve l
                         LEFT JOIN tune_choice t USING (space, metric, recipe_config_id)
                         WHERE l.space = ? AND l.metric = ? ORDER BY l.recipe_config_id, l.lr""",
        space,
        headline.name,
    )
    if rows:
        plot_lr_curves(rows, out_dir / "lr_curve.png", headline)


def topic_sections(con, headline: Headline, data: ReportData, training: KappaTraining) -> list[str]:
    """The sections between the κ table and the throughput, in index.md's order, each its Markdown or "": the
    shared ones, and each question's (``sweep/questions/``) at its ``report_place``: ``costs`` after "at equal
    cost", ``mechanism`` after the κ theory. A question's section reads its own views through ``con``."""
    return [
        equal_cost_section(data.matched, headline),
        *question_sections(con, headline, data, "costs"),
        kappa_metric_section(data.kappa_metric, headline),
        kappa_training_section(training, headline),
        theory_section(data),
        *question_sections(con, headline, data, "mechanism"),
        loader_bound_section(data.data_wait_fractions),
    ]


def question_sections(con, headline: Headline, data: ReportData, place: str) -> list[str]:
    """The report sections of the questions whose ``report_place`` is ``place``, in registry order."""
    return [q.report_section(con, data.space, headline, data) for q in QUESTIONS if q.report_place == place]


def render_markdown(space: str, question: str | None, headline: Headline, data: ReportData, extra: str = "") -> str:
    """index.md: the answer first, then the edges, the figures, and every table behind them; ``extra`` (the
    topic sections) between the κ table and the throughput."""
    parts = [f"# Where does the head-for-depth trade break? Space `{space}`\n"]
    if question:
        parts.append(f"> {' '.join(question.split())}\n")
    parts += answer_section(space, headline, data)
    if data.edge is not None:  # an edge search: its verdicts, measured and implied, before the grid's edges
        parts.append(edge_section(data.edge, headline))
    parts += edges_section(headline, data)
    parts.append(f"## {headline.label.capitalize()} against parameters\n\n![Pareto](pareto.png)\n")
    parts.append(pareto_caption(headline, len(data.front)))
    parts.append(markdown_table(data.front, with_kv(FRONT_COLUMNS, data.front)))
    if data.kappa:
        parts.append("\n## κ of the attention block\n\n![kappa](kappa_vs_heads.png)\n")
        whole_block = [r for r in data.kappa if r["layer"] is None and r["attention"] is None]
        parts.append(markdown_table(whole_block, with_kv(KAPPA_COLUMNS, whole_block)))
    if extra:
        parts.append(extra)
    parts.append("\n## Throughput\n\n![throughput](throughput_vs_params.png)\n")
    parts.append("\n## Every config against the baseline\n")
    parts.append(cost_sentence(data.device_s))
    extra_columns = tuple(column for q in QUESTIONS for column in q.verdict_columns)
    parts.append(markdown_table(data.verdicts, with_kv(VERDICT_COLUMNS, data.verdicts, extra_columns)))
    parts.append("\n## Trials that did not finish\n")
    parts.append(markdown_table(data.infeasible, INFEASIBLE_COLUMNS))
    parts.append(
        '\nThe same answer in SQL: `sweep sql "FROM depth_edge"`, or in the plain DuckDB shell: '
        "`sweep sql --print-views > views.sql`, then `duckdb -init views.sql`.\n"
    )
    return "\n".join(parts)
