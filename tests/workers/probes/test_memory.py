"""Peak memory of a training step (workers/probes/memory.py): what it covers and how it grows."""

import torch

from workers.config import ModelSpec
from workers.models import build_model
from workers.probes.memory import CPU_METHOD, live_storage_bytes, peak_train_step_memory, training_step_tensors
from workers.train import make_context, train_step


def small_training(batch_size):
    spec = ModelSpec(depth=2, num_heads=4, embed_dim=64, mlp_dim=128, img_size=16, patch_size=2, num_classes=10)
    model = build_model(spec)
    from workers.config import TrainSpec

    ctx = make_context(model, TrainSpec(), torch.device("cpu"), total_steps=10)
    images, labels = torch.randn(batch_size, 3, 16, 16), torch.randint(0, 10, (batch_size,))
    train_step(ctx, images, labels)  # optimiser state exists from here on
    ctx.optimizer.zero_grad(set_to_none=True)  # the measured step allocates its own gradients
    return ctx, images, labels, training_step_tensors(model, ctx.optimizer, [images, labels])


def test_cpu_peak_memory_covers_weights_and_grows_with_batch():
    ctx, images, labels, live = small_training(8)
    small, method = peak_train_step_memory(lambda: train_step(ctx, images, labels), torch.device("cpu"), live)
    assert method == CPU_METHOD
    weights = sum(p.numel() * 4 for p in ctx.model.parameters())
    assert small > 4 * weights  # weights, grads, two Adam moments, plus activations
    ctx, images, labels, live = small_training(64)
    large, _ = peak_train_step_memory(lambda: train_step(ctx, images, labels), torch.device("cpu"), live)
    # activations of 64 images of 65 tokens × 64 channels × 2 blocks are far more than those of 8
    assert large > small + 56 * 65 * 64 * 4 * 2


def test_step_tensors_are_weights_adam_moments_and_batch_without_gradients():
    ctx, images, labels, live = small_training(8)
    parameters = list(ctx.model.parameters())
    weights = sum(p.numel() * 4 for p in parameters)
    # float32 weights, two float32 moments, one float32 step counter per parameter tensor, the batch
    expected = 3 * weights + 4 * len(parameters) + images.numel() * 4 + labels.numel() * 8
    assert live_storage_bytes(live) == expected


def test_live_storage_bytes_counts_each_storage_once():
    base = torch.zeros(100)
    assert live_storage_bytes([base, base[:10], base.view(10, 10)]) == 400
