"""Nyströmformer (workers/families/nystromformer.py): the LRA ListOps baseline's count within the paper's
range, and its landmark and kernel rules. κ and the closed forms, shared with its control:
tests/workers/families/test_sequence.py."""

import pytest

from tests.workers.families.test_sequence import expected_params, spec
from workers.models import ModelConfigError, build_model
from workers.probes.params import param_breakdown


def test_the_lra_baseline_is_in_the_papers_parameter_range():
    """The Nyströmformer authors' LRA ListOps model (2 layers, 2 heads, d 64, MLP 128) at LRA's 2000 tokens
    padded to 2048, as HF builds it: within the paper's 160k-470k."""
    s = spec("nystromformer", depth=2, heads=2, width=64, mlp=128, seq_len=2048, num_landmarks=64, conv_kernel_size=35)
    assert 160_000 <= expected_params(s) == param_breakdown(s, build_model(s))["params"] <= 470_000


def test_landmarks_must_divide_the_sequence_and_the_kernel_be_odd():
    with pytest.raises(ModelConfigError) as error:
        build_model(spec("nystromformer", seq_len=60, num_landmarks=8, conv_kernel_size=4))
    assert "num_landmarks=8: must divide seq_len (60)" in str(error.value)
    assert "conv_kernel_size=4: must be odd" in str(error.value)
