"""`sweep report`'s index.html: the answer paragraph and three plotly figures in one self-contained file,
checked as text (fast) and rendered in real headless Chromium (Debian's `chromium` package)."""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from sweep.analysis.report.html import FIGURE_IDS, front_on
from sweep.analysis.sql import connect
from sweep.cli import main
from sweep.results.importer import import_file
from sweep.results.schema import SCHEMA_VERSION, table_from_rows
from tests.helpers import PLANTED_MEANS, trial_row, write_csv

CHROMIUM = Path("/usr/bin/chromium")
# No sandbox (CI runs as root), no GPU, and none of the background fetches a browser starts with: the
# machine has no internet, and without these Chromium fills its log with refused connections.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
EPOCHS = 3


def planted_rows() -> list[dict]:
    """test_analysis's planted sweep (baseline depth 4 × 4 heads; edges known), with FLOPs, latency and a
    trial id per row, so that every figure has something to draw."""
    rows = []
    for (depth, heads), mean in PLANTED_MEANS.items():
        for seed in range(3):
            row = trial_row("plant", depth, heads, seed, mean + (seed - 1) * 0.05)
            row |= {"trial_id": f"{row['config_id']}-s{seed}", "flops_per_sample": 10**6 * depth + 1000 * heads,
                    "latency_b1_ms": 0.5 * depth + 0.01 * heads}  # fmt: skip
            rows.append(row)
    return rows


def epoch_rows(trials: list[dict]) -> list[dict]:
    """κ falls over training in every trial: 1000/heads × (1 + 2/epoch)."""
    return [
        {"schema_version": SCHEMA_VERSION, "space": t["space"], "sweep_id": "planted", "trial_id": t["trial_id"],
         "config_id": t["config_id"], "seed": t["seed"], "epoch": epoch, "val_score": t["top1"],
         "kappa_mean": 1000.0 / t["num_heads"] * (1 + 2 / epoch)}
        for t in trials for epoch in range(1, EPOCHS + 1)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The planted results, reported through the CLI once for this module's tests; the report folder."""
    tmp_path = tmp_path_factory.mktemp("html_report")
    rows = planted_rows()
    results = tmp_path / "results"
    assert import_file(write_csv(tmp_path / "plant.csv", rows), results) == {"plant": 36}
    epochs = results / "epochs" / "plant" / "planted" / "epochs.parquet"
    epochs.parent.mkdir(parents=True)
    pq.write_table(table_from_rows("epochs", epoch_rows(rows)), epochs)
    out = tmp_path / "report"
    assert main(["report", "plant", "--results", str(results), "--out", str(out)]) == 0
    return out


class PageText(HTMLParser):
    """The text inside the element with id ``answer``, and every <script>'s src."""

    def __init__(self):
        super().__init__()
        self.answer, self.sources, self.depth = "", [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src"):
            self.sources.append(attrs["src"])
        if attrs.get("id") == "answer" or self.depth:
            self.depth += 1

    def handle_endtag(self, tag):
        self.depth = max(0, self.depth - 1)

    def handle_data(self, data):
        if self.depth:
            self.answer += data


def figure_json(page: str, div_id: str) -> tuple[list[dict], dict]:
    """The traces and the layout plotly will draw in ``div_id``: the JSON handed to Plotly.newPlot."""
    call = re.search(rf'Plotly\.newPlot\(\s*"{div_id}",\s*', page)
    assert call, f"no Plotly.newPlot for {div_id}"
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(page, call.end())
    layout, _ = decoder.raw_decode(page, re.compile(r",\s*").match(page, end).end())
    return data, layout


@pytest.mark.slow
def test_the_page_holds_the_answer_three_figures_and_no_remote_script(report):
    page = (report / "index.html").read_text(encoding="utf-8")
    markdown = (report / "index.md").read_text()
    answer = markdown.split("## The answer\n", 1)[1].strip().split("\n")[0]
    parsed = PageText()
    parsed.feed(page)
    assert parsed.answer == answer.replace("`", "") and answer.startswith("Of 11 configs judged")
    for div_id in FIGURE_IDS:
        assert page.count(f'id="{div_id}"') == 1
    assert not [src for src in parsed.sources if re.match(r"(https?:)?//", src)]
    assert page.count("plotly.js v") == 1  # embedded once, not once per figure
    assert len(page) > 3_000_000  # plotly.js itself is ~4.8 MB: it is inline, not linked


@pytest.mark.slow
def test_the_heatmap_hovers_with_the_interval_and_the_verdict(report):
    page = (report / "index.html").read_text(encoding="utf-8")
    (heatmap,) = figure_json(page, "delta-heatmap")[0]
    assert heatmap["type"] == "heatmap" and heatmap["y"] == ["1", "2", "4"]
    assert heatmap["x"] == ["1×64", "4×16", "16×4", "64×1"]
    hover = dict(zip(heatmap["x"], heatmap["hovertext"][0], strict=True))  # depth 1
    assert "Δtop1 -10.0 points, 95% CI" in hover["4×16"] and "verdict: <b>breaks</b>" in hover["4×16"]
    assert "verdict: <b>holds</b>" in hover["16×4"]
    assert "the baseline: 90.0%" in heatmap["hovertext"][2][1]  # depth 4 × 4 heads


@pytest.mark.slow
def test_the_pareto_panels_and_kappa_curves_carry_the_planted_rows(report):
    page = (report / "index.html").read_text(encoding="utf-8")
    pareto = figure_json(page, "pareto-front")[0]
    assert [t["name"] for t in pareto] == ["config (± s.e.)", "Pareto front", "baseline"] * 3
    assert all(len(t["x"]) == 12 for t in pareto[::3])  # every config in each of the three panels
    kappa = figure_json(page, "kappa-training")[0]
    assert len(kappa) == 12 and all(t["x"] == list(range(1, EPOCHS + 1)) for t in kappa)
    assert all(t["y"][0] > t["y"][-1] for t in kappa)  # the planted fall


@pytest.mark.slow
def test_the_python_front_is_the_pareto_view_on_params(report):
    con = connect(report.parent / "results")
    relation = con.execute("FROM configs")
    configs = [dict(zip([d[0] for d in relation.description], r, strict=True)) for r in relation.fetchall()]
    view = {r[0] for r in con.execute("SELECT config_id FROM pareto").fetchall()}
    assert {c["config_id"] for c in front_on(configs, "params", "max")} == view
    # Were lower better: each config lower than every config with fewer parameters (1001: 85, 1004: 80, 1064: 70)
    lower_is_better = {c["config_id"] for c in front_on(configs, "params", "min")}
    assert lower_is_better == {"plant-d1-h1", "plant-d1-h4", "plant-d1-h64"}


@pytest.mark.slow
def test_a_figure_without_data_says_why(tmp_path):
    """No baseline row, no per-epoch κ, no FLOPs or latency recorded: the page keeps its three figures, each
    saying what is missing."""
    rows = [trial_row("bare", depth, 4, seed, 90.0 + seed, baseline=(0, 0)) for depth in (1, 2) for seed in range(2)]
    results = tmp_path / "results"
    assert import_file(write_csv(tmp_path / "bare.csv", rows), results) == {"bare": 4}
    assert main(["report", "bare", "--results", str(results), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    notes = {div_id: [a["text"] for a in figure_json(page, div_id)[1].get("annotations", [])] for div_id in FIGURE_IDS}
    assert notes == {
        "delta-heatmap": ["no verdicts: the results hold no baseline row for this space"],
        "pareto-front": ["no forward FLOPs per sample recorded", "no batch-1 latency (ms) recorded"],
        "kappa-training": ["no κ recorded per epoch (the epochs table has no kappa_mean for this space)"],
    }
    assert "No verdicts: the results hold no baseline row" in page  # and the answer paragraph says why


def run_chromium(page: Path, screenshot: Path, profile: Path) -> tuple[str, str]:
    """Open ``page`` in headless Chromium, let its scripts run, save a screenshot; the DOM after the scripts
    ran, and Chromium's log (the page's console messages are its ``CONSOLE`` lines)."""
    done = subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", "--window-size=1280,2200", "--hide-scrollbars",
         f"--screenshot={screenshot}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs headless Chromium: apt-get install chromium (Debian)")
def test_the_page_renders_in_headless_chromium(report, tmp_path):
    from PIL import Image

    screenshot = report / "index.png"
    dom, log = run_chromium(report / "index.html", screenshot, tmp_path / "chromium-profile")
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    assert console == [], "the page wrote to the console:\n" + "\n".join(console)
    for div_id in FIGURE_IDS:  # plotly adds the class and its <svg class="main-svg"> only once it has drawn
        drawn = re.search(rf'<div id="{div_id}" class="[^"]*js-plotly-plot.*?class="main-svg"', dom, re.S)
        assert drawn, f"{div_id} was not drawn"
    assert dom.count('class="main-svg"') >= 2 * len(FIGURE_IDS)
    assert 'data-title="Share chart' not in dom  # plotly.js 4's upload to Plotly Cloud: removed from the modebar
    pixels = np.asarray(Image.open(screenshot).convert("RGB"), dtype=np.int16)  # height × width × RGB
    inked = (pixels.min(axis=2) < 235).mean()  # not white
    # Coloured (not grey): the heatmap, markers and curves, not text. Measured: 26% inked, 4.2% coloured; the
    # same page with Plotly.newPlot made a no-op (text only): 1.9% inked, 0.01% coloured.
    coloured = (pixels.max(axis=2) - pixels.min(axis=2) > 60).mean()
    assert inked > 0.05 and coloured > 0.02, f"{inked:.1%} of the page inked, {coloured:.1%} coloured"
