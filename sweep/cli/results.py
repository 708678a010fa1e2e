"""The commands over results: ``sweep sql``, ``import``, ``doctor``, ``compact``, ``report``, ``data fetch`` /
``data export`` and ``gpu-check``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.analysis.views import views_text
from sweep.errors import DataUnavailableError, UsageError

if TYPE_CHECKING:
    pass


def parse_results(text: str):
    """``--results``: a folder or an object-store prefix (``sweep/results/storage.py``, imported when given)."""
    from sweep.results.storage import parse_results as parse

    return parse(text)


def render(columns: list[str], rows: list[tuple], fmt: str) -> str:
    from sweep.analysis.sql import render as render_rows

    return render_rows(columns, rows, fmt)


def parse_tolerance(value: float | None) -> float | None:
    """``--tolerance``: one tolerance for every verdict, in each space's metric units; must be positive."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"--tolerance must be a positive number in the metric's units (e.g. 0.5), got {value}")
    return value


def cmd_sql(args) -> int:
    from sweep.analysis.sql import reads_results, run_query

    if args.print_views:  # the same definitions the tool reads, for `duckdb -init`
        print(views_text(), end="")
        return 0
    if args.query is None:
        raise UsageError('sweep sql needs a query, e.g. sweep sql "FROM depth_edge" (or --print-views)')
    if reads_results(args.query):
        check_results_exist(args.results)
    columns, rows = run_query(args.results, args.query, tolerance=parse_tolerance(args.tolerance))
    print(render(columns, rows, args.format))
    return 0


def check_results_exist(results) -> None:
    """A query of the results over a folder that does not exist, or holds no results file, would answer 0 rows
    as if the sweep had found nothing: say so in one line instead (exit 2), as ``sweep doctor`` does."""
    from sweep.errors import QueryError
    from sweep.results.schema import ALL_TABLES
    from sweep.results.storage import is_remote

    if is_remote(results):
        if not results.exists():
            raise QueryError(f"nothing under {results}; give the prefix a sweep wrote with --results")
        if not any(results.files(table) for table in ALL_TABLES):
            raise QueryError(f"no results files under {results}; give the prefix a sweep wrote with --results")
        return
    if not Path(results).is_dir():
        raise QueryError(f"no results folder at {results}; give the one a sweep wrote with --results DIR")
    if not any(next((Path(results) / table).glob("**/*.parquet"), None) for table in ALL_TABLES):
        raise QueryError(
            f"no results under {results} (no trials, epochs, kappa or spaces files): give the folder a sweep wrote "
            "with --results DIR, or run a sweep into this one first"
        )


def cmd_import(args) -> int:
    from sweep.results.importer import import_file
    from sweep.results.storage import is_remote

    if is_remote(args.results):
        raise UsageError(
            f"sweep import writes to a results folder, not to object storage ({args.results}); import into a "
            f"folder, then copy its files under the prefix (e.g. `aws s3 sync DIR {args.results}`)"
        )

    written = import_file(args.file, args.results)
    for space, count in written.items():
        print(f"imported {count} trial rows into space {space!r} under {args.results}/trials/{space}/")
    return 0


def cmd_doctor(args) -> int:
    from sweep.results.doctor import cmd_doctor as doctor

    return doctor(args)


def cmd_compact(args) -> int:
    from sweep.results.compact import compact

    outcomes = compact(args.results, args.space, wait=args.wait)
    if not outcomes:
        print(f"nothing to compact under {args.results}/: no results files")
    for outcome in outcomes:
        print(f"compacted {outcome.words()}")
    return 1 if any("disagree" in why for outcome in outcomes for why in outcome.skipped) else 0


def cmd_report(args) -> int:
    from sweep.analysis.hints import space_name
    from sweep.analysis.report import write_report

    # The question comes from the results (the sweeps' `spaces` rows), not the space file: reading the file
    # would load the model and data registries (torch), and a space known only from imported rows has none.

    out = args.out or Path("reports") / space_name(args.space)  # a space file's path: its name is the file's stem
    index = write_report(args.space, args.results, out, tolerance=parse_tolerance(args.tolerance))
    print(f"report written: {index} and {index.with_name('index.html')} (interactive, works offline)")
    return 0


def cmd_data_fetch(args) -> int:
    """Fetch the space's data through ``datasets`` (its progress bars on stderr); one line per split: rows,
    bytes, the cache folder and the data's identity. A data set on disk or generated says so."""
    from sweep.space.loader import load_space

    _, space, _ = load_space(args.space, args.profile)
    try:
        lines = space.data.fetch()
    except (FileNotFoundError, ValueError) as exc:
        raise DataUnavailableError(str(exc)) from exc
    for line in lines:
        print(line)
    return 0


def cmd_data_export(args) -> int:
    from sweep.results.data_export import cmd_data_export as export

    return export(args)


def cmd_gpu_check(args) -> int:
    from workers.gpu_check import run

    return run(args)
