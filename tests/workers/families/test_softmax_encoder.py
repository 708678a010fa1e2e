"""The exact-attention control (workers/families/softmax_encoder.py): padded keys are masked, so what the
padding holds changes neither κ nor the logits. κ and the closed forms, shared with Nyströmformer:
tests/workers/families/test_sequence.py."""

import pytest
import torch

from tests.workers.families.test_sequence import probe_batch, spec
from workers.models import build_model
from workers.probes.kappa import kappa_per_layer


def test_kappa_ignores_what_the_padding_holds_for_softmax_attention():
    """Padded keys are masked, so changing the token ids at padded positions leaves κ unchanged."""
    torch.manual_seed(0)
    s = spec("softmax_encoder")
    model = build_model(s).eval()
    batch = probe_batch()
    other = {**batch, "input_ids": torch.where(batch["attention_mask"] > 0, batch["input_ids"], 3)}
    kappas = [row["kappa"] for row in kappa_per_layer(s, model, batch)]
    assert [row["kappa"] for row in kappa_per_layer(s, model, other)] == pytest.approx(kappas, rel=1e-9)


def test_the_logits_ignore_what_the_padding_holds():
    torch.manual_seed(0)
    s = spec("softmax_encoder")
    model = build_model(s).eval()
    batch = probe_batch()
    other = {**batch, "input_ids": torch.where(batch["attention_mask"] > 0, batch["input_ids"], 3)}
    assert not torch.equal(other["input_ids"], batch["input_ids"])
    with torch.no_grad():
        assert torch.allclose(model(**batch), model(**other), atol=1e-5)
