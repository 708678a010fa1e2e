"""The Gaussian law's κ (workers/probes/gaussian.py) against the singular values of sampled Gaussian matrices."""

import math

import numpy as np
import pytest

from workers.probes.gaussian import gaussian_edges_kappa, theorem_kappa


def sampled_kappa(rows: int, cols: int, seed: int = 0) -> float:
    singular = np.linalg.svd(np.random.default_rng(seed).standard_normal((rows, cols)), compute_uv=False)
    return float(singular[0] / singular[-1])


def test_the_theorem_is_its_closed_form_and_undefined_where_d_is_not_above_n():
    assert theorem_kappa(16, 64) == pytest.approx((8 + 4) / (8 - 4))
    assert theorem_kappa(64, 64) == math.inf and theorem_kappa(128, 64) == math.inf
    assert theorem_kappa(197, 10**8) == pytest.approx(1.0, abs=0.01)  # κ → 1 as the width grows


@pytest.mark.parametrize(("n_tokens", "width"), [(64, 1024), (1024, 64), (100, 400)])
def test_the_edges_predict_a_sampled_gaussian_block_either_shape(n_tokens, width):
    predicted = gaussian_edges_kappa(n_tokens, width)
    assert sampled_kappa(n_tokens, width) == pytest.approx(predicted, rel=0.1)
    assert gaussian_edges_kappa(width, n_tokens) == predicted  # the law is symmetric in N and D
    if width > n_tokens:
        assert predicted == pytest.approx(theorem_kappa(n_tokens, width))
    assert gaussian_edges_kappa(64, 64) == math.inf
