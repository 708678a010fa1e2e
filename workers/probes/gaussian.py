"""What the Gaussian law says about κ of an attention block (Theorem 3.2 and the Marchenko–Pastur edges):
closed forms, plain arithmetic without torch, so the driver's analysis (``sweep/plan/theory.py``, the report)
reads them without loading a model library. ``workers/probes/kappa.py`` samples the same law.
"""

from __future__ import annotations

import math


def theorem_kappa(n_tokens: int, width: int) -> float:
    """Theorem 3.2's estimate for i.i.d. Gaussian heads, D = h·d ≫ N: (√D + √N) / (√D − √N).

    The ratio of the edges of the Marchenko–Pastur support; meaningless (returned as inf) for D ≤ N.
    """
    if width <= n_tokens:
        return math.inf
    root_d, root_n = math.sqrt(width), math.sqrt(n_tokens)
    return (root_d + root_n) / (root_d - root_n)


def gaussian_edges_kappa(n_tokens: int, width: int) -> float:
    """κ of an N×D matrix of i.i.d. Gaussian entries for large N and D, either shape: the ratio of the edges of
    the Marchenko–Pastur support of its singular values, (√max(N,D) + √min(N,D)) / |√D − √N| (Bai–Yin).

    Equals :func:`theorem_kappa` where D > N; where D < N it is the same law read for a tall matrix, and it
    grows with D towards the square case D = N (returned as inf), where the smallest singular value
    vanishes."""
    if width == n_tokens:
        return math.inf
    root_d, root_n = math.sqrt(width), math.sqrt(n_tokens)
    return (root_d + root_n) / abs(root_d - root_n)
