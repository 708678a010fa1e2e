"""An edge search's report (sweep/analysis/report/edge.py): through `sweep report`, the measured and implied
verdicts in words, each column's edge and the contradiction line; the Δ heatmap's implied cells (cross-hatched,
with an "implied" legend entry) found among the figure's artists; the HTML heatmap's implied cells; and a space
that ran no edge search has none of it."""

import json

import pytest

from sweep.analysis.report import figures
from sweep.analysis.report.edge import gather_edge, heatmap_rows
from sweep.analysis.sql import connect
from sweep.cli import main
from sweep.headline import Headline
from tests.sweep.analysis.views.test_edge import SPACE, write_edge_space

HEADLINE = Headline(name="top1", mode="max", tolerance=0.5)


@pytest.fixture(scope="module")
def edge_results(tmp_path_factory):
    results = tmp_path_factory.mktemp("edge") / "results"
    write_edge_space(results)
    return results


@pytest.mark.slow
def test_sweep_report_says_measured_and_implied_verdicts_apart(edge_results, tmp_path):
    out = tmp_path / "report"
    assert main(["report", SPACE, "--results", str(edge_results), "--out", str(out)]) == 0
    text = (out / "index.md").read_text()
    section = text[text.index("## The edge search") : text.index("## Along depth")]
    assert "**implied** (never measured)" in section and "Bonferroni" in section
    assert "3 implied and never trained" in section
    # a column with its edge bracketed by measurements, each depth's verdict measured or implied, and from where
    column = section[section.index("- **num_heads=8, head_dim=8**") :].split("\n- ")[0]
    assert column.startswith("- **num_heads=8, head_dim=8**: breaks at depth 2, holds from depth 3.")
    assert "  - depth 2: breaks (measured: gain -8.3 ± 0.5, 2 seeds)" in column
    assert "  - depth 4: holds (implied by depth 3, measured)" in column
    assert "  - depth 1: failed (all 2 trials); breaks (implied by depth 2, measured)" in column
    # the contradiction, in one line, and nothing implied in its column
    assert "- edge search: column num_heads=16, head_dim=4: depth 4 breaks (gain -5.92 ± 0.4" in section
    assert "depth is not monotone here; measuring the whole column" in section
    heads16 = section[section.index("- **num_heads=16, head_dim=4**") :].split("\n- ")[0]
    assert "implied" not in heads16 and "  - depth 3: untried" in heads16
    html = (out / "index.html").read_text()
    assert "never trained: implied holds (by depth 3, measured)" in html and '"name":"implied"' in html


def drawn_heatmap(monkeypatch, rows, tmp_path):
    """Draw the Δ heatmap of ``rows``; return the figure instead of closing it."""
    kept = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: kept.append(fig))
    figures.plot_delta_heatmap(rows, tmp_path / "delta_heatmap.png", HEADLINE)
    return kept[0]


def test_the_heatmap_marks_each_implied_cell_and_says_so_in_its_legend(edge_results, monkeypatch, tmp_path):
    edge = gather_edge(connect(edge_results), SPACE, HEADLINE)
    rows = heatmap_rows(edge)
    ax = drawn_heatmap(monkeypatch, rows, tmp_path).axes[0]
    hatched = [p for p in ax.patches if p.get_hatch() == figures.IMPLIED_HATCH]
    implied = [r for r in edge.verdicts if r["implied"]]
    assert len(hatched) == len(implied) == 4  # d4h4, d4h8, d5h8 untried, d1h8 failed: each implied cell, only those
    columns = sorted({r["num_heads"] for r in rows})
    depths = sorted({r["depth"] for r in rows})
    assert len(rows) == 20 and len(ax.get_xticks()) == 4 and len(ax.get_yticks()) == 5  # the whole lattice
    at = {(p.get_x() + 0.5, p.get_y() + 0.5) for p in hatched}
    assert at == {(columns.index(r["num_heads"]), depths.index(r["depth"])) for r in implied}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"implied {v} (monotone along depth; not measured)" for v in ("breaks", "holds")]
    words = {t.get_text() for t in ax.texts}
    assert "implied\nholds\n(by depth 3)" in words and "failed; implied\nbreaks\n(by depth 2)" in words


def test_a_space_without_an_edge_search_has_no_implied_cell(edge_results, monkeypatch, tmp_path):
    con = connect(edge_results)
    assert gather_edge(con, "no-such-space", HEADLINE) is None
    verdicts = [dict(zip([c[0] for c in con.description], row, strict=True)) for row in con.execute(
        "FROM vs_baseline").fetchall()]  # fmt: skip
    ax = drawn_heatmap(monkeypatch, verdicts, tmp_path).axes[0]
    assert not [p for p in ax.patches if p.get_hatch() == figures.IMPLIED_HATCH] and ax.get_legend() is None
    assert json.loads(con.execute("SELECT search FROM space_settings").fetchone()[0])["kind"] == "edge"
