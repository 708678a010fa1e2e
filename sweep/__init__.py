"""The sweep driver: decides what to run and records what happened.

The few names a script needs, importable from ``sweep`` itself::

    from sweep import load_space, make_plan, run_sweep, run_query

    name, space, profile = load_space("mqar_recall")
    outcome = run_sweep(make_plan(name, space, profile), Path("results"), name)
    columns, rows = run_query(Path("results"), "SELECT * FROM depth_edge")
    open_results("results").vs_baseline.df()    # in a notebook: views as DuckDB relations or DataFrames

They load on first use, so ``import sweep.errors`` (or the CLI's ``--help``) does not start Ray or torch.
"""

from __future__ import annotations

import importlib

_FACADE = {
    "load_space": "sweep.space.loader",
    "shipped_spaces": "sweep.space.loader",
    "make_plan": "sweep.plan.plan",
    "run_sweep": "sweep.run.tuner",
    "run_query": "sweep.analysis.sql",
    "connect": "sweep.analysis.sql",
    "open_results": "sweep.analysis.notebook",
    "write_report": "sweep.analysis.report",
    "import_file": "sweep.results.importer",
    "SweepError": "sweep.errors",
    "SpaceError": "sweep.errors",
}

__all__ = sorted(_FACADE)


def __getattr__(name: str):
    if name not in _FACADE:
        raise AttributeError(f"module 'sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(_FACADE[name]), name)
