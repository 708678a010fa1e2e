"""Speed options of the recipe: train.compile, train.channels_last, fused AdamW on CUDA.

torch.compile's default backend (Inductor) writes and builds C++ on CPU: on a 2-core machine its first
build takes 10-60 s (the kernel cache then makes it seconds), too slow for every run of the suite. The
plumbing test therefore compiles with the ``aot_eager`` backend, which traces the forward and backward
graphs exactly as Inductor receives them (Dynamo and AOTAutograd) and runs them without generating code.
The Inductor test runs with HFD_INDUCTOR_TESTS=1; ``bench/compile_speedup.py`` always uses Inductor.
"""

import functools
import os
import shutil

import pytest
import torch

import workers.train
from workers.config import ModelSpec, TrainSpec
from workers.models import build_model
from workers.train import make_context, make_optimizer, train_one_epoch, use_fused_adamw

CPU = torch.device("cpu")
SPEC = ModelSpec(depth=1, num_heads=2, embed_dim=16, mlp_dim=32, patch_size=4, img_size=8, num_classes=3)


def tiny_vit(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(SPEC)


def image_batches(count: int = 4, batch: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, 3, 8, 8, generator=generator), torch.randint(0, 3, (batch,), generator=generator))
            for _ in range(count)]  # fmt: skip


def train_losses(spec: TrainSpec, batches, warmup: int = 0):
    """Per-step training losses of a fresh tiny ViT (same initial weights every call) and its context."""
    ctx = make_context(tiny_vit(), spec, CPU, total_steps=len(batches))
    losses = []
    for batch in batches:
        stats = train_one_epoch(ctx, [batch], warmup_steps_left=warmup)
        losses.append(stats.train_loss)
    return losses, ctx


def test_compiled_training_matches_eager_and_times_the_compile(monkeypatch):
    monkeypatch.setattr(workers.train.torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    batches = image_batches()
    eager, _ = train_losses(TrainSpec(amp_bf16=False), batches)
    compiled, ctx = train_losses(TrainSpec(amp_bf16=False, compile=True), batches)
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert ctx.step_model is not ctx.model and ctx.compile_s > 0
    # checkpoints and probes see the eager module: its state_dict keys, not the wrapper's "_orig_mod." ones
    assert all(not key.startswith("_orig_mod") for key in ctx.model.state_dict())


def test_the_compiling_step_stays_out_of_the_throughput_window(monkeypatch):
    monkeypatch.setattr(workers.train.torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    torch._dynamo.reset()
    ctx = make_context(tiny_vit(), TrainSpec(amp_bf16=False, compile=True), CPU, total_steps=3)
    stats = train_one_epoch(ctx, image_batches(3), warmup_steps_left=0)  # asked for no warm-up
    assert stats.steps == 3 and stats.timed_samples == 2 * 4  # the compiling step was warm-up all the same
    assert ctx.compile_s is not None


@pytest.mark.skipif(os.environ.get("HFD_INDUCTOR_TESTS") != "1", reason="Inductor's first C++ build takes 10-60 s "
                    "here; set HFD_INDUCTOR_TESTS=1 (bench/compile_speedup.py runs Inductor every time)")  # fmt: skip
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler")
def test_inductor_compiles_a_training_step_on_cpu():
    torch._dynamo.reset()
    batches = image_batches(2)
    eager, _ = train_losses(TrainSpec(amp_bf16=False), batches)
    compiled, ctx = train_losses(TrainSpec(amp_bf16=False, compile=True), batches)
    assert compiled == pytest.approx(eager, rel=1e-4) and ctx.compile_s > 0


def test_channels_last_gives_the_default_losses():
    batches = image_batches()
    default, _ = train_losses(TrainSpec(amp_bf16=False), batches)
    channels_last, ctx = train_losses(TrainSpec(amp_bf16=False, channels_last=True), batches)
    assert channels_last == pytest.approx(default, rel=1e-5)
    patch_weight = ctx.model.patch_embed.proj.weight  # the ViT's one 4-D weight
    assert patch_weight.is_contiguous(memory_format=torch.channels_last) and not patch_weight.is_contiguous()


def test_fused_adamw_only_when_every_parameter_is_on_cuda():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert use_fused_adamw([cuda, cuda])
    assert not use_fused_adamw([cpu])
    assert not use_fused_adamw([cuda, cpu])
    assert not use_fused_adamw([])
    optimizer = make_optimizer(tiny_vit(), TrainSpec())
    assert not optimizer.defaults["fused"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fused_adamw_on_cuda():
    optimizer = make_optimizer(tiny_vit().cuda(), TrainSpec())
    assert optimizer.defaults["fused"] is True
