"""The choices the command line offers and the modules behind it accept, kept here, free of heavy imports, so
that building the parser (``sweep --help``, ``sweep sql``) loads neither torch nor Ray, and no stage imports
``sweep/cli/`` for them."""

from __future__ import annotations

from typing import Literal, get_args

Tracker = Literal["mlflow", "tensorboard", "wandb"]
TRACKERS: tuple[str, ...] = get_args(Tracker)  # the experiment trackers a sweep can also log to (``--log``)

# `sweep rerun --select`: which configs get the missing seeds (sweep/run/rerun.py); `inconclusive` is adaptive.py's
SELECTIONS = ("all", "near-break", "pareto", "top-k")
