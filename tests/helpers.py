"""Helpers several test files share."""

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
