"""The report's pictures and tables as people see them: every PNG holds its titles and labels inside the
canvas (checked on the rendered images), κ beyond float64 precision is named, and tables print numbers as
people read them."""

import re

import matplotlib.image
import numpy as np
import pytest

from sweep.analysis.report import label_points, overlaps, write_report
from sweep.markdown import KAPPA_RANK_DEFICIENT, markdown_table
from sweep.results.importer import import_file
from tests.helpers import PLANTED_MEANS, trial_row, write_csv

RANK_DEFICIENT_KAPPA = 3.2e15  # what a numerically rank-deficient block's κ looks like in a row


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of the planted grid (three seeds each), its 64-head configs with a rank-deficient κ."""
    tmp = tmp_path_factory.mktemp("figures")
    rows = []
    for (depth, heads), mean in PLANTED_MEANS.items():
        kappa = RANK_DEFICIENT_KAPPA if heads == 64 else 1000.0 / heads
        rows += [trial_row("fig", depth, heads, seed, mean + (seed - 1) * 0.1, kappa=kappa) for seed in range(3)]
    # A one-column grid: its heatmap is the narrowest figure, where a long title is most likely to be cut.
    rows += [trial_row("narrow", depth, 4, seed, 90.0 - depth + seed * 0.1) for depth in (2, 4) for seed in range(3)]
    import_file(write_csv(tmp / "planted.csv", rows), tmp / "results")
    paths = [write_report(space, tmp / "results", tmp / space) for space in ("fig", "narrow")]
    return paths[0].read_text(), sorted(png for path in paths for png in path.parent.glob("*.png"))


@pytest.mark.slow
def test_every_figure_is_drawn_inside_its_canvas(report):
    _, pngs = report
    assert {p.name for p in pngs} >= {"pareto.png", "delta_heatmap.png", "throughput_vs_params.png"}
    for png in pngs:
        image = matplotlib.image.imread(png)[..., :3]
        border = np.concatenate([image[:3].reshape(-1, 3), image[-3:].reshape(-1, 3),
                                 image[:, :3].reshape(-1, 3), image[:, -3:].reshape(-1, 3)])  # fmt: skip
        # A title or label cut at the edge leaves dark pixels in the outermost rows or columns.
        assert border.min() > 0.9, f"{png.name}: something is drawn at the canvas's edge (clipped)"


def test_kappa_beyond_float64_precision_is_named_in_the_tables():
    rows = [{"num_heads": 64, "kappa_median": RANK_DEFICIENT_KAPPA}, {"num_heads": 4, "kappa_median": 912.3456}]
    table = markdown_table(rows, ["num_heads", "kappa_median"]).splitlines()
    assert table[2] == "| 64 | 3.2e+15 (rank-deficient) |"
    assert table[3] == "| 4 | 912.3 |"  # a measurable κ stays a number
    assert RANK_DEFICIENT_KAPPA >= KAPPA_RANK_DEFICIENT > 1e12


def test_kappa_beyond_float64_precision_is_named_on_the_figure(monkeypatch, tmp_path):
    import sweep.analysis.report.figures

    drawn = []
    monkeypatch.setattr(sweep.analysis.report.figures, "save_figure", lambda fig, path: drawn.append(fig))
    rows = [{"layer": None, "attention": None, "family": "vit", "depth": 2, "num_heads": heads, "num_kv_heads": heads,
             "head_dim": 64 // heads, "attn_dim": 64, "embed_dim": 64, "kappa_median": kappa}
            for heads, kappa in ((1, 40.0), (4, 900.0), (16, RANK_DEFICIENT_KAPPA))]  # fmt: skip
    sweep.analysis.report.figures.plot_kappa(rows, tmp_path / "k.png")
    sweep.analysis.report.figures.plot_kappa(rows[:2], tmp_path / "k2.png")
    named = [[t.get_text() for ax in fig.axes for t in ax.texts] for fig in drawn]
    assert all("rank-deficient" in text for text in named[0]) and len(named[0]) == 2  # on both panels
    assert named[1] == []  # measurable κ only: no such words


@pytest.mark.slow
def test_tables_print_numbers_as_people_read_them(report):
    text, _ = report
    table_lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert table_lines
    # No six-digit exponent forms (5.87389e+06) and no long float tails (89.93333333) in a table cell.
    assert not [line for line in table_lines if re.search(r"\d\.\d{4,}e[+-]\d", line)]
    assert not [line for line in table_lines if re.search(r"\d\.\d{6,}", line)]


def test_labels_never_overlap(tmp_path):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    points = [(1.0, 1.0), (1.01, 1.0), (1.02, 1.01), (3.0, 2.0)]  # three almost on top of each other
    ax.scatter(*zip(*points, strict=True))
    label_points(ax, points, ["2×4", "2×16", "4×64", "1×1"], fontsize=7)
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert len(boxes) >= 2
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not overlaps((a.x0, a.y0, a.width, a.height), (b.x0, b.y0, b.width, b.height))
    plt.close(fig)
