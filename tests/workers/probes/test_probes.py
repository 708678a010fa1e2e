"""FLOPs, peak memory and throughput probes."""

import time

import pytest
import torch

from workers.config import ModelSpec
from workers.models import build_model, variant_spec
from workers.probes.flops import forward_flops_per_sample
from workers.probes.memory import CPU_METHOD, live_storage_bytes, peak_train_step_memory, training_step_tensors
from workers.probes.throughput import batch1_latency_ms, inference_throughput
from workers.train import make_context, train_step


def vit_forward_flops(spec: ModelSpec) -> int:
    """Matmul FLOPs of a ViT forward on one image, written out by hand (2 FLOPs per multiply-add)."""
    n, c, a, m = spec.num_tokens, spec.embed_dim, spec.attn_dim, spec.mlp_dim
    patches = n - 1
    embed = 2 * patches * c * spec.in_chans * spec.patch_size**2
    block = 2 * n * c * 3 * a + 2 * 2 * n * n * a + 2 * n * a * c + 2 * 2 * n * c * m
    head = 2 * c * spec.num_classes
    return embed + spec.depth * block + head


@pytest.mark.parametrize("overrides", [{}, {"num_heads": 24, "head_dim": 16, "depth": 6}])
def test_flops_equal_hand_count(overrides):
    spec = variant_spec("vit_base_patch16_224", **overrides)
    assert forward_flops_per_sample(spec) == vit_forward_flops(spec)


def test_vit_base_flops_are_35_1_gflops():
    flops = forward_flops_per_sample(variant_spec("vit_base_patch16_224"))
    assert flops / 1e9 == pytest.approx(35.13, abs=0.01)  # timm quotes 17.6 GMACs


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


class Sleeper(torch.nn.Module):
    """A model whose forward takes a known wall time, whatever the batch: the probes' clock checked against it."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, images):
        time.sleep(self.seconds)
        return images.flatten(1) * self.scale


def test_inference_throughput_and_latency_match_a_known_forward_time():
    """16 images per 20 ms forward: at most 800 images/s (a forward cannot be faster than its sleep), and
    within 10× of it on a loaded machine; batch-1 latency likewise at least 20 ms."""
    from contextlib import nullcontext

    model, images = Sleeper(0.02), torch.randn(16, 3, 8, 8)
    assert 800 / 10 < inference_throughput(model, images, 1, 3, nullcontext) <= 800
    assert 20 <= batch1_latency_ms(model, images, 1, 3, nullcontext) < 200
    assert model.training  # restored
