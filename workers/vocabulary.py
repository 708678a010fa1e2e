"""The project's shared words, each defined once: the shape keys, the trial statuses, and the "did you mean"
hint every error about a misspelt name gives.

``workers`` holds them because both sides use them and ``sweep`` may import ``workers`` but not the reverse.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from enum import StrEnum

# The four searched axes plus head_dim, which a space may fix or search: what makes one transformer shape.
DEFAULT_DATA_SET = "digits"  # the data set of a `data:` block that names none (workers/data/registry.py)
SHAPE_KEYS = ("depth", "num_heads", "head_dim", "embed_dim", "mlp_dim")


class TrialStatus(StrEnum):
    """How a trial ended; the ``status`` column of every table.

    - ``ok``: trained to its budget and measured;
    - ``diverged``: the training loss became NaN or infinite;
    - ``oom``: the device (or host) ran out of memory;
    - ``error``: anything else went wrong (the row's ``error`` says what);
    - ``pruned``: the scheduler (ASHA) stopped it early; its last scores are kept.
    """

    OK = "ok"
    DIVERGED = "diverged"
    OOM = "oom"
    ERROR = "error"
    PRUNED = "pruned"


STATUSES = tuple(status.value for status in TrialStatus)
# Outcomes that count as a seed's result: rerunning them would only repeat it. An ``error`` may be the
# harness's fault (a lost node, a missing file), so reruns retry it.
RECORDED_STATUSES = tuple(s.value for s in TrialStatus if s is not TrialStatus.ERROR)


def did_you_mean(name: object, known: Iterable[str], n: int = 3, cutoff: float = 0.5) -> str:
    """``"did you mean a, b? "`` for the entries of ``known`` closest to ``name`` (difflib's ratio ≥
    ``cutoff``, at most ``n``, closest first), or ``""`` when none is close. Callers append what is known."""
    close = difflib.get_close_matches(str(name), list(known), n=n, cutoff=cutoff)
    return f"did you mean {', '.join(close)}? " if close else ""
