"""The ``sweep`` command.

    sweep run SPACE [--profile P] [--seeds N|a,b,c] [--results DIR|s3://bucket/prefix|gs://bucket/prefix]
                   [--log mlflow|tensorboard|wandb …] [--trials N] [--fresh]
    sweep plan SPACE [--profile P] [--format table|csv|json]
    sweep preflight SPACE [--profile P] [--results DIR|s3://…] [--compile]
    sweep spaces
    sweep validate SPACE|FILE [--profile P]
    sweep sql "QUERY" [--results DIR] [--format table|csv|json] [--tolerance X]
    sweep import FILE [--results DIR]
    sweep doctor [--results DIR] [--fix]
    sweep compact [--results DIR] [--space SPACE …] [--wait]
    sweep report SPACE [--results DIR] [--out DIR] [--tolerance X]
    sweep rerun SPACE --seeds N [--select all|near-break|pareto|top-k] [--dry-run]
    sweep rerun SPACE --select inconclusive --budget N [--dry-run]
    sweep rerun SPACE --profile P [--trials N]      (an Optuna search: resume it, like run)
    sweep kappa-theory (--space SPACE [--profile P] | --tokens N (--width D | --head-dim d) [--heads 1,2,4])
    sweep data export listops --rows N --out DIR [--seed S] [--max-depth D] [--max-args A] …

Errors print on one line each (every problem in a space at once) and exit non-zero (2 for a bad space
or missing data); ``--debug`` shows the traceback.

Each command's code is in this package by what it works on: ``run.py`` (run, rerun), ``plan.py`` (plan,
spaces, validate), ``results.py`` (sql, import, doctor, compact, report, data, gpu-check), ``theory.py``
(kappa-theory); ``parsers.py`` holds every option, ``options.py`` the choices that --help lists without
loading what implements them. This module is ``main``: one line per error, the traceback with ``--debug``.
"""

from __future__ import annotations

import logging
import os
import sys

from sweep.cli.parsers import build_parser
from sweep.errors import SweepError, SweepInterrupted

# Each command imports what it needs when it runs: the analysis commands (sql, report, doctor, compact) and
# `--help` load neither torch nor Ray; planning and running do (the spaces' models and data sets).


# --- commands ---------------------------------------------------------------------------------------------


# --- parsing ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(name)s: %(message)s")
    try:
        return args.func(args)
    except SweepInterrupted as exc:  # Ctrl-C during a sweep: one line, what was recorded stays
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except SweepError as exc:
        if args.debug:
            raise
        first, *rest = str(exc).splitlines() or [""]
        rest = [line if line.startswith("  ") else "  " + line for line in rest if line.strip()]
        print("\n".join([f"error: {first}", *rest]), file=sys.stderr)  # what follows the first line, indented
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sweep spaces | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # one line for a person; the traceback is what --debug is for
        if args.debug:
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr)
        if isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError | IsADirectoryError):
            return 2  # a path the user gave
        print("  (not an error the tool expected: `sweep --debug …` shows where it came from)", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """``FileNotFoundError: no such file …`` on one line (the first line of a multi-line message)."""
    text = str(exc).strip().splitlines()
    if not text:  # a library's error without words (DuckDB's can be): say what is known, as a sentence
        return f"{type(exc).__module__}.{type(exc).__name__} was raised with no message"
    return f"{type(exc).__name__}: {text[0]}"
