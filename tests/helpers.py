"""Helpers several test files share."""

import pytest
import torch


def capture_layer_inputs(model: torch.nn.Module, layers, inputs: dict) -> dict:
    """Each probed layer's first input (its hidden states) on one forward of ``model`` over ``inputs``,
    by the layer's name, captured here (not by the probe under test)."""
    captured = {}
    handles = [
        layer.module.register_forward_pre_hook(lambda _m, args, name=layer.name: captured.__setitem__(name, args[0]))
        for layer in layers
    ]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return captured


def assert_tables_agree(results) -> None:
    """Across the three tables a sweep wrote: each trial's ``kappa_mean`` is the mean over layers of its
    ``kappa`` rows at its last epoch, and the same as its last ``epochs`` row's; its token rates are its
    sample rates × seq_len (for token sequences)."""
    from sweep.sql import run_query

    _, rows = run_query(
        results,
        """SELECT t.kappa_mean, avg(k.kappa), any_value(e.kappa_mean), t.train_tokens_per_s,
                  t.train_samples_per_s * t.seq_len
           FROM trials t
           JOIN kappa k ON k.trial_id = t.trial_id AND k.sweep_id = t.sweep_id AND k.epoch = t.epochs_run
           JOIN epochs e ON e.trial_id = t.trial_id AND e.sweep_id = t.sweep_id AND e.epoch = t.epochs_run
           WHERE t.status = 'ok' GROUP BY ALL""",
    )
    assert rows, "no finished trial has κ rows at its last epoch"
    for kappa_mean, over_layers, in_epochs, tokens_per_s, samples_times_len in rows:
        assert kappa_mean == pytest.approx(over_layers, rel=1e-12) == pytest.approx(in_epochs, rel=1e-12)
        assert tokens_per_s == (pytest.approx(samples_times_len) if samples_times_len is not None else None)
