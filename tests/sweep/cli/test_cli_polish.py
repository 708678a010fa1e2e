"""Polish (issue 38, point 11) through the CLI: ``--gpu`` takes a prefix only one known GPU starts with and
lists the candidates of an ambiguous one; tiny memories and times scale their unit; ``sweep plan`` of an
ImageNet space estimates GPU-hours from ImageNet-1k's known size; counts agree with their nouns. (The YAML
syntax error's one line is tested with the personal spaces, tests/sweep/cli/test_cli_personal_spaces.py.)"""

import re

import pytest

from sweep.cli import main
from sweep.text import duration_words, size_words
from tests.helpers import trial_row, write_csv


def plan_out(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_gpu_prefix_names_the_one_gpu_it_starts_and_lists_an_ambiguous_one(capsys):
    code, out, _ = plan_out(capsys, "local_digits", "--profile", "quick", "--gpu", "h100")
    assert code == 0 and "estimate on h100-80gb at MFU" in out
    code, _, err = plan_out(capsys, "local_digits", "--profile", "quick", "--gpu", "a100")
    assert code == 2 and err.strip() == "error: GPU 'a100' could be a100-80gb or a100-40gb: give the whole name"
    code, _, err = plan_out(capsys, "local_digits", "--profile", "quick", "--gpu", "v100")
    assert code == 2 and "unknown GPU 'v100': known are h100-80gb" in err


def test_tiny_memories_and_times_scale_their_unit(capsys):
    code, out, _ = plan_out(capsys, "local_digits", "--profile", "quick", "--gpu", "h100-80gb")
    assert code == 0
    assert "GiB" not in out.split("estimate on")[0] and " h " not in out and "e-0" not in out.split("GPU-hours")[1]
    assert re.search(r"\d MiB +yes +[\d.]+ (µs|ms|s) ", out)
    assert re.search(r"GPU-hours \(= [\d.]+ (µs|ms|s) of GPU time\)", out)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (512, "512 B"),
        (3500, "3.42 KiB"),
        (12.5 * 2**20, "12.5 MiB"),
        (1.5 * 2**30, "1.5 GiB"),
        (300 * 2**30, "300 GiB"),
    ],
)
def test_size_words(value, words):
    assert size_words(value) == words


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(5.07e-09 * 3600, "18.3 µs"), (0.0123, "12.3 ms"), (4.5, "4.5 s"), (720, "12 min"), (3.25 * 3600, "3.25 h")],
)
def test_duration_words(seconds, words):
    assert duration_words(seconds) == words


def test_an_imagenet_space_is_estimated_from_imagenet_1k_size(capsys):
    code, out, _ = plan_out(capsys, "vit_b_fixed_mlp", "--gpu", "h100")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("estimate on h100-80gb"))
    assert "GPU-hours unknown" not in line and re.search(r"training steps only: [\d,.]+ GPU-hours", line)
    code, with_size, _ = plan_out(capsys, "vit_b_fixed_mlp", "--gpu", "h100", "--train-samples", "1281167")
    assert next(x for x in with_size.splitlines() if x.startswith("estimate on")) == line


def test_one_import_problem_is_one_problem(tmp_path, capsys):
    path = write_csv(tmp_path / "one.csv", [trial_row("kx", 1, 1, 0, 50.0, status="ok") | {"seed": -1}])
    assert main(["import", str(path), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert "(1 problem)" in err and "1 problems" not in err


@pytest.mark.slow
def test_report_captions_the_pareto_table_and_says_each_kappa_line_once(tmp_path, capsys):
    """One width (d_model 64): the across-widths ρ is the fixed-width one, printed once; the Pareto table has
    its caption."""
    from tests.helpers import PLANTED_MEANS, planted_rows

    results, out = tmp_path / "results", tmp_path / "report"
    assert main(["import", str(write_csv(tmp_path / "r.csv", planted_rows("px", PLANTED_MEANS, 0.2))),
                 "--results", str(results)]) == 0  # fmt: skip
    assert main(["report", "px", "--results", str(results), "--out", str(out)]) == 0
    capsys.readouterr()
    text = (out / "index.md").read_text()
    kappa = text[text.index("## Does κ track the metric?") :].split("\n## ")[0]
    assert [line for line in kappa.splitlines() if line.startswith("- ")] == [
        "- vit, at fixed width (d_model 64, attention 64, MLP 128): Spearman ρ between final κ and top-1 = +0.25 "
        "(95% bootstrap -0.55…+0.80), 12 configs."
    ]
    pareto = text[text.index("![Pareto](pareto.png)") :]
    assert pareto.split("\n\n")[1].startswith("Grey points: every finished config, top-1 (mean over seeds")
    assert "the 2 configs of the Pareto front" in pareto


@pytest.mark.slow
def test_html_heatmap_washes_out_inconclusive_cells_and_one_epoch_kappa_says_so(tmp_path, capsys):
    """Through ``sweep report``: each inconclusive cell (and only those) is covered by a pale dotted rectangle,
    as the PNG hatches them; κ recorded at one epoch only gives a note, not dots on an empty axis."""
    import pyarrow.parquet as pq

    from sweep.results.schema import table_from_rows
    from tests.sweep.analysis.report.test_html import epoch_rows, figure_json, planted_rows

    rows = planted_rows()
    rows += [trial_row("plant", 4, 64, 3, 70.0) | {"trial_id": "plant-d4-h64-s3"}]  # 4 × 64: now unclear
    results, out = tmp_path / "results", tmp_path / "report"
    assert main(["import", str(write_csv(tmp_path / "p.csv", rows)), "--results", str(results)]) == 0
    epochs = results / "epochs" / "plant" / "planted" / "epochs.parquet"
    epochs.parent.mkdir(parents=True)
    pq.write_table(table_from_rows("epochs", [e for e in epoch_rows(rows) if e["epoch"] == 1]), epochs)
    assert main(["report", "plant", "--results", str(results), "--out", str(out)]) == 0
    assert main(["sql", "SELECT depth, num_heads FROM vs_baseline WHERE verdict = 'inconclusive' ORDER BY 1, 2",
                 "--results", str(results), "--format", "csv"]) == 0  # fmt: skip
    inconclusive = {tuple(map(int, line.split(","))) for line in capsys.readouterr().out.splitlines()[-20:]
                    if re.fullmatch(r"\d+,\d+", line)}  # fmt: skip
    assert (4, 64) in inconclusive
    page = (out / "index.html").read_text(encoding="utf-8")
    (heatmap,), layout = figure_json(page, "delta-heatmap")
    washed = {(heatmap["y"][round(s["y0"] + 0.5)], heatmap["x"][round(s["x0"] + 0.5)]) for s in layout["shapes"]}
    assert washed == {(str(d), f"{h}×{64 // h}") for d, h in inconclusive}
    assert all(s["fillcolor"] == "rgba(255, 255, 255, 0.6)" and s["line"]["dash"] == "dot" for s in layout["shapes"])
    kappa, kappa_layout = figure_json(page, "kappa-training")
    assert kappa == [] and kappa_layout["annotations"][0]["text"].startswith("κ was probed at one epoch only")
