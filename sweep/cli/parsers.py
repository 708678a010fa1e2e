"""The argument parsers of every ``sweep`` command, their help texts and defaults."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.analysis.views import analysis_views
from sweep.choices import SELECTIONS, TRACKERS

if TYPE_CHECKING:
    pass
from sweep.cli.plan import cmd_plan, cmd_spaces, cmd_validate
from sweep.cli.results import (
    cmd_compact,
    cmd_data_export,
    cmd_data_fetch,
    cmd_doctor,
    cmd_gpu_check,
    cmd_import,
    cmd_report,
    cmd_sql,
    parse_results,
)
from sweep.cli.run import cmd_preflight, cmd_rerun, cmd_run, parse_trials
from sweep.cli.theory import cmd_kappa_theory

DEFAULT_SPACE = "mqar_recall"  # its default profile, cpu, answers on 2 cores in under 10 minutes


DEFAULT_RESULTS = Path("results")


SPACE_HELP = f"a shipped space name, one in ./search_spaces/, or a path to a YAML file (default: {DEFAULT_SPACE})"


PROFILE_HELP = "a profile of the space (`sweep spaces NAME` lists them); default: the space's default_profile"


RESULTS_HELP = "the results folder, or an s3:// / gs:// prefix (default: results)"


FORMAT_HELP = "how to print rows (default: table)"


TOLERANCE_HELP = (
    "judge every verdict at this tolerance, in each space's metric units (points of top-1, nats of loss); "
    "default: each space's own metric.tolerance"
)


def add_data_parser(sub) -> None:
    """``sweep data export listops …`` (generated ListOps as LRA's three TSV files) and ``sweep data fetch SPACE``
    (download what a space's Hub-sourced data needs, or find it in the cache)."""
    data = sub.add_parser("data", help="fetch a space's Hub data, or write data sets generated here")
    commands = data.add_subparsers(dest="data_command", required=True)
    fetch = commands.add_parser("fetch", help="download (or find in the HF cache) what a space's data needs")
    fetch.add_argument("space", help="a shipped space name or a path to a YAML file")
    fetch.add_argument("--profile", help="the profile whose data to fetch (default: the space's default)")
    fetch.set_defaults(func=cmd_data_fetch)
    exports = commands.add_parser("export", help="write files")
    kinds = exports.add_subparsers(dest="data_set", required=True)
    lo = kinds.add_parser("listops", help="ListOps with LRA's grammar as basic_{train,val,test}.tsv (LRA's layout)")
    lo.add_argument("--rows", type=int, required=True, help="training rows")
    lo.add_argument("--out", type=Path, required=True, help="folder to write the three files to")
    lo.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    lo.add_argument("--max-depth", type=int, default=10, help="LRA: 10")
    lo.add_argument("--max-args", type=int, default=10, help="LRA: 10")
    lo.add_argument("--min-length", type=int, default=500, help="rows kept have length > this (LRA: 500)")
    lo.add_argument("--max-length", type=int, default=2000, help="rows kept have length < this (LRA: 2000)")
    lo.add_argument("--val-rows", type=int, help="default: rows // 48, at least 1 (LRA's ratio)")
    lo.add_argument("--test-rows", type=int, help="default: rows // 48, at least 1 (LRA's ratio)")
    lo.set_defaults(func=cmd_data_export)


def add_gpu_check_parser(sub) -> None:
    """`sweep gpu-check`: ``workers/gpu_check.py``'s check (what `make gpu-check` runs), for installed copies."""
    from workers.gpu_check_options import add_options

    gpu = sub.add_parser("gpu-check", help="ViT-B/16 bf16 on this GPU: memory, throughput, MFU, κ (CPU: reduced)")
    add_options(gpu)
    gpu.set_defaults(func=cmd_gpu_check)


def parse_hours(text: str) -> float:
    try:
        hours = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of hours (0.5, 120), got {text!r}") from None
    if not hours > 0 or hours == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of hours, got {text!r}")
    return hours


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by the commands that launch trials (run, rerun)."""
    parser.add_argument("space", nargs="?", default=DEFAULT_SPACE, help=SPACE_HELP)
    parser.add_argument("--profile", help=PROFILE_HELP)
    parser.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    parser.add_argument("--data-root", type=Path, help="where the data set lives (overrides data.root)")
    parser.add_argument(
        "--data-workers",
        type=int,
        help="DataLoader workers per trial for on-disk data (overrides data.num_workers; default: CPUs per trial - 1)",
    )
    parser.add_argument("--wait", action="store_true", help="if a sweep of this space is running, wait for it")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument(
        "--verbose", action="store_true", help="Ray's, Tune's and Optuna's own output too (Tune's status table)"
    )
    parser.add_argument(
        "--trials",
        type=parse_trials,
        help="an Optuna search: train N more trials now (default: what its num_trials has left); an edge search: "
        "train at most N trials now (default: what its max_trials leaves, else no cap)",
    )
    parser.add_argument(
        "--max-gpu-hours",
        type=parse_hours,
        metavar="H",
        help="start no trial once the space's recorded device-hours plus the running trials' would pass H "
        "(GPU-hours; CPU-hours for trials without a GPU); a later run with a larger H continues",
    )
    parser.add_argument(
        "--log",
        action="append",
        choices=TRACKERS,
        help="also log every trial to this experiment tracker (repeatable; adds to the space's log:)",
    )


def add_run_parsers(sub) -> None:
    run = sub.add_parser("run", help="run a search space's sweep on local Ray or $RAY_ADDRESS")
    add_launch_options(run)
    run.add_argument("--seeds", help="a count (3 → seeds 0,1,2) or a list (0,5,9); default: the space's")
    run.add_argument(
        "--fresh",
        action="store_true",
        help="run every trial, even those already recorded (an Optuna search: a new study, its whole budget)",
    )
    run.set_defaults(func=cmd_run)

    rerun = sub.add_parser("rerun", help="run exactly the (config, seed) pairs missing for a selection")
    add_launch_options(rerun)
    rerun.add_argument("--seeds", type=int, help="seeds wanted per config: 0 … N-1 (not with inconclusive)")
    rerun.add_argument(
        "--select",
        choices=(*SELECTIONS, "inconclusive", "expectations"),
        default="all",
        help="which configs; inconclusive: more seeds only where a verdict is still open, up to --budget; "
        "expectations: more seeds only on the sides of a claim (expect:) still inconclusive, up to --budget",
    )
    rerun.add_argument(
        "--budget",
        dest="trial_budget",
        type=int,
        help="--select inconclusive or expectations: at most this many more trials",
    )
    rerun.add_argument(
        "--max-seeds",
        type=int,
        help="--select inconclusive or expectations: no config gets a seed once it has this many (recorded ones count)",
    )
    rerun.add_argument("--top-k", type=int, help="K for --select top-k")
    rerun.add_argument("--dry-run", action="store_true", help="print what is missing, run nothing")
    rerun.set_defaults(func=cmd_rerun)

    preflight = sub.add_parser(
        "preflight",
        help="before GPU hours: one step and every probe of each config on CPU (bf16 autocast), data, results, "
        "resources",
    )
    preflight.add_argument("space", nargs="?", default=DEFAULT_SPACE, help=SPACE_HELP)
    preflight.add_argument("--profile", help=PROFILE_HELP)
    preflight.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    preflight.add_argument("--data-root", type=Path, help="where the data set lives (overrides data.root)")
    preflight.add_argument("--compile", action="store_true", help="also run each step through torch.compile")
    preflight.add_argument(
        "--stand-in-data",
        action="store_true",
        help="the data lives where the trials will run, not here: if it is not found here, say so and run each "
        "config on random batches of its shapes instead of failing",
    )
    preflight.add_argument(
        "--node-gpus", type=float, metavar="N", help="check resources against nodes with N GPUs (with --node-cpus)"
    )
    preflight.add_argument(
        "--node-cpus", type=float, metavar="M", help="... and M CPUs: the cluster the trials will run on, not this one"
    )
    add_estimate_options(preflight)  # with --gpu: each config's estimated memory and time; one that will not fit fails
    preflight.set_defaults(func=cmd_preflight)


def add_plan_parsers(sub) -> None:
    plan = sub.add_parser("plan", help="list every trial a sweep would launch, and what the rules removed")
    plan.add_argument("space", nargs="?", default=DEFAULT_SPACE, help=SPACE_HELP)
    plan.add_argument("--profile", help=PROFILE_HELP)
    plan.add_argument("--seeds", help="a count (3 → seeds 0,1,2) or a list (0,5,9); default: the space's")
    plan.add_argument("--format", choices=["table", "csv", "json"], default="table", help=FORMAT_HELP)
    plan.add_argument(
        "--write-configs",
        type=Path,
        metavar="DIR",
        help="also write each trial's worker config as DIR/<config_id>-s<seed>.json (run one with `trial FILE`)",
    )
    add_estimate_options(plan)
    plan.set_defaults(func=cmd_plan)

    spaces = sub.add_parser(
        "spaces", help="the shipped spaces: the question each answers, and what each profile runs and how long"
    )
    spaces.add_argument("name", nargs="?", help="one space (a name or a YAML file): also its why:")
    spaces.add_argument("--names", action="store_true", help="print only the spaces' names, one per line")
    spaces.add_argument("--profile", help="with --names: only the spaces that define this profile")
    spaces.set_defaults(func=cmd_spaces)

    validate = sub.add_parser("validate", help="check a space (name or file) and all its profiles")
    validate.add_argument("space", help="a shipped space name, one in ./search_spaces/, or a path to a YAML file")
    validate.add_argument("--profile", help="also check that this profile exists (every profile is validated)")
    validate.set_defaults(func=cmd_validate)


def add_estimate_options(parser) -> None:
    """``--gpu`` and its companions: estimated peak memory and training time per trial (sweep/plan/estimate.py)."""
    estimate = parser.add_argument_group("estimates (peak memory and training time per trial on a GPU)")
    estimate.add_argument("--gpu", metavar="NAME", help="a GPU of the table: h100-80gb, h200-141gb, a100-80gb, "
                          "a100-40gb, l40s-48gb, rtx4090-24gb")  # fmt: skip
    estimate.add_argument("--gpu-memory-gib", type=float, metavar="X", help="instead of --gpu: its memory, GiB")
    estimate.add_argument(
        "--gpu-tflops", type=float, metavar="Y", help="instead of --gpu: its bf16 dense peak, TFLOP/s"
    )
    estimate.add_argument("--mfu", type=float, help="model FLOP utilisation to assume (default 0.30)")
    estimate.add_argument(
        "--mfu-from", type=Path, metavar="FILE", help="the MFU a `make gpu-check` result JSON measured"
    )
    estimate.add_argument("--price-per-gpu-hour", type=float, metavar="Z", help="also the cost of the GPU-hours")
    estimate.add_argument(
        "--train-samples", type=int, metavar="N", help="training samples per epoch, where the data set does not say"
    )


def add_results_parsers(sub) -> None:
    sql = sub.add_parser(
        "sql",
        help="read-only DuckDB SQL over the results tables and the analysis views",
        description="Read-only DuckDB SQL over the results. Tables: trials, epochs, kappa, spaces. Analysis "
        f"views (`sweep sql --print-views` prints their SQL; docs/analysis.md says what each holds): "
        f"{', '.join(analysis_views())}.",
    )
    sql.add_argument("query", nargs="?", help='one SQL query, e.g. "FROM depth_edge" or "SELECT status, count(*) '
                     'FROM trials GROUP BY ALL"')  # fmt: skip
    sql.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table", help=FORMAT_HELP)
    sql.add_argument("--tolerance", type=float, help=TOLERANCE_HELP)
    sql.add_argument("--print-views", action="store_true", help="print every analysis view's SQL instead (for the "
                     "plain DuckDB shell: `sweep sql --print-views > views.sql; duckdb -init views.sql`)")  # fmt: skip
    sql.set_defaults(func=cmd_sql)

    imp = sub.add_parser("import", help="add trial rows from a CSV or Parquet file (all rows valid, or none)")
    imp.add_argument("file", type=Path, help="a CSV or Parquet file of trials rows (docs/schema.md: sweep import)")
    imp.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help="the results folder to add to")
    imp.set_defaults(func=cmd_import)

    doctor = sub.add_parser("doctor", help="check every results file; --fix sets damaged ones aside")
    doctor.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    doctor.add_argument("--fix", action="store_true", help="move damaged files and temporaries to DIR/.quarantine/")
    doctor.set_defaults(func=cmd_doctor)

    compact = sub.add_parser("compact", help="merge each sweep's per-trial files into one file per table")
    compact.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    compact.add_argument("--space", action="append", help="only this space (repeatable; default: every space)")
    compact.add_argument("--wait", action="store_true", help="if a sweep of a space is running, wait for it")
    compact.set_defaults(func=cmd_compact)

    report = sub.add_parser("report", help="write a Markdown + PNG report answering where the trade breaks")
    report.add_argument("space", help="the space to report: a name as recorded in the results, or its file")
    report.add_argument("--results", type=parse_results, default=DEFAULT_RESULTS, help=RESULTS_HELP)
    report.add_argument("--out", type=Path, help="folder to write (default reports/SPACE)")
    report.add_argument("--tolerance", type=float, help=TOLERANCE_HELP)
    report.set_defaults(func=cmd_report)


def add_kappa_theory_parser(sub) -> None:
    theory = sub.add_parser("kappa-theory", help="sampled κ of Gaussian heads beside Theorem 3.2's value")
    theory.add_argument(
        "--space", help="the space's own shapes and tokens, grouped by its parametrisation (with --profile)"
    )
    theory.add_argument("--profile", help="with --space: the profile whose plan to read")
    theory.add_argument("--tokens", type=int, help="N, tokens per image (ViT-B/16 at 224: 197); --space gives it")
    theory.add_argument("--width", type=int, help="fixed total width D = heads × head_dim (ViT-B: 768)")
    theory.add_argument("--head-dim", type=int, help="fixed head size d; the width grows with heads")
    theory.add_argument("--heads", default="1,2,4,8,12,16,24,32,48,64", help="comma-separated head counts")
    theory.add_argument("--samples", type=int, default=16, help="Gaussian draws per shape (default 16)")
    theory.add_argument("--format", choices=["table", "csv", "json"], default="table", help=FORMAT_HELP)
    theory.set_defaults(func=cmd_kappa_theory)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sweep", description="Heads-for-depth sweeps: plan, run, query.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_parsers(sub)
    add_plan_parsers(sub)
    add_results_parsers(sub)
    add_kappa_theory_parser(sub)
    add_data_parser(sub)
    add_gpu_check_parser(sub)
    return parser
