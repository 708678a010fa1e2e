"""The training loop, split into its parts: seeding, optimiser and schedule, one step, one epoch, evaluation.

Recipe: AdamW (no weight decay on biases, norms, tokens and position embeddings, as timm does), linear
warm-up then cosine decay of the learning rate per step, label-smoothed cross-entropy, gradient clipping
by global 2-norm, and bf16 autocast on CUDA.
"""

from __future__ import annotations

import math
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
from timm.optim import param_groups_weight_decay
from torch import nn

from workers.batch import Inputs, forward
from workers.config import TrainSpec


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite."""


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed Python, NumPy and torch; with ``deterministic``, ask torch for deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so wall-clock timings measure work done and not work queued."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_optimizer(model: nn.Module, spec: TrainSpec) -> torch.optim.AdamW:
    """AdamW with timm's weight-decay groups (``timm.optim.param_groups_weight_decay``, as timm's
    ``create_optimizer_v2`` builds them): no weight decay on a parameter that is 1-D (biases, norm scales)
    or named ``*.bias``, or whose name matches a pattern in the model's ``no_weight_decay()`` (fnmatch
    wildcards, e.g. XCiT's ``pos_embed.*``: its whole positional-encoding module); ``spec.weight_decay`` on
    every other trainable parameter. Models without ``no_weight_decay`` (HF ones) get the 1-D rule alone.
    With ``weight_decay`` 0 every parameter is in one group."""
    no_weight_decay = set(getattr(model, "no_weight_decay", lambda: set())())
    groups = param_groups_weight_decay(model, spec.weight_decay, no_weight_decay_list=no_weight_decay)
    return torch.optim.AdamW(groups, lr=spec.lr)


def lr_at_step(step: int, total_steps: int, spec: TrainSpec) -> float:
    """Learning rate for ``step`` (0-based): linear warm-up to ``lr`` over ``warmup_steps``, then cosine
    decay from ``lr`` to ``min_lr`` over the remaining steps."""
    warmup = min(spec.warmup_steps, max(total_steps - 1, 0))
    if step < warmup:
        return spec.lr * (step + 1) / warmup
    progress = (step - warmup) / max(total_steps - warmup, 1)
    return spec.min_lr + 0.5 * (spec.lr - spec.min_lr) * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def make_scheduler(optimizer: torch.optim.Optimizer, total_steps: int, spec: TrainSpec):
    """A per-step LambdaLR following :func:`lr_at_step`."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_at_step(step, total_steps, spec) / spec.lr)


def autocast_for(device: torch.device, spec: TrainSpec):
    """bf16 autocast on CUDA when asked for; full precision otherwise (CPU bf16 is slow and unhelpful)."""
    if device.type == "cuda" and spec.amp_bf16:
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return nullcontext()


@dataclass
class TrainContext:
    """What a training step needs; built once per trial."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    loss_fn: nn.Module
    device: torch.device
    spec: TrainSpec
    total_steps: int
    step: int = 0  # optimizer steps taken so far


def make_context(model: nn.Module, spec: TrainSpec, device: torch.device, total_steps: int) -> TrainContext:
    optimizer = make_optimizer(model, spec)
    return TrainContext(
        model=model,
        optimizer=optimizer,
        scheduler=make_scheduler(optimizer, total_steps, spec),
        loss_fn=nn.CrossEntropyLoss(label_smoothing=spec.label_smoothing, ignore_index=IGNORE_INDEX),
        device=device,
        spec=spec,
        total_steps=total_steps,
    )


IGNORE_INDEX = -100  # a token label that is not scored (padding, or a position no answer is asked at)


def flatten_tokens(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token predictions (B, N, classes) with labels (B, N) as (B·N, classes) and (B·N,); per-sample
    ones (B, classes) with labels (B,) unchanged."""
    if logits.ndim == 3:
        return logits.flatten(0, 1), labels.flatten()
    return logits, labels


def train_step(ctx: TrainContext, inputs: Inputs, labels: torch.Tensor) -> torch.Tensor:
    """One optimiser step on one batch (images, or a dict of token tensors); returns the (detached) loss
    without synchronising the device. Labels are one class per sample, or one per token (language
    models), where ``IGNORE_INDEX`` marks tokens that are not scored: the loss is the mean over the rest."""
    ctx.optimizer.zero_grad(set_to_none=True)  # before the forward: last step's gradients are not kept alive
    with autocast_for(ctx.device, ctx.spec):
        loss = ctx.loss_fn(*flatten_tokens(forward(ctx.model, inputs), labels))
    loss.backward()
    if ctx.spec.grad_clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(ctx.model.parameters(), ctx.spec.grad_clip_norm)
    ctx.optimizer.step()
    ctx.scheduler.step()
    ctx.step += 1
    return loss.detach()


@dataclass
class EpochStats:
    train_loss: float
    steps: int
    lr: float  # learning rate of the epoch's last step
    timed_samples: int  # samples in the steady-state window (after warm-up steps)
    timed_s: float  # wall seconds of that window, device synchronised at both ends


# How often the loss is checked for NaN/inf: each check synchronises the device, so not every step.
DIVERGENCE_CHECK_EVERY_STEPS = 20


def train_one_epoch(ctx: TrainContext, batches, warmup_steps_left: int) -> EpochStats:
    """Train on every batch of ``batches`` (stopping at the step budget).

    Steps after the first ``warmup_steps_left`` are timed as the steady state for throughput: the clock
    starts after synchronising at the first such step and stops after synchronising at the end.
    Raises :class:`DivergedError` on a non-finite loss.
    """
    ctx.model.train()
    loss_sum = torch.zeros((), device=ctx.device)
    steps = timed_samples = 0
    timer_start = None
    lr = ctx.optimizer.param_groups[0]["lr"]
    for inputs, labels in batches:
        if ctx.step >= ctx.total_steps:
            break
        if steps == warmup_steps_left:
            synchronize(ctx.device)
            timer_start = time.perf_counter()
        lr = ctx.optimizer.param_groups[0]["lr"]
        loss_sum += train_step(ctx, inputs, labels)
        steps += 1
        if timer_start is not None:
            timed_samples += len(labels)
        if steps % DIVERGENCE_CHECK_EVERY_STEPS == 0:
            check_finite(loss_sum, ctx.step)
    synchronize(ctx.device)
    timed_s = time.perf_counter() - timer_start if timer_start is not None else 0.0
    check_finite(loss_sum, ctx.step)
    return EpochStats(loss_sum.item() / max(steps, 1), steps, lr, timed_samples, timed_s)


def check_finite(loss_sum: torch.Tensor, step: int) -> None:
    if not torch.isfinite(loss_sum).item():
        raise DivergedError(f"training loss became {loss_sum.item()} by step {step}")


@torch.no_grad()
def evaluate(model: nn.Module, batches, device: torch.device, spec: TrainSpec, sequences: bool = False) -> dict:
    """Held-out scores on ``batches``, with the metric names of the task:

    - images: ``top1`` and ``top5`` accuracy in percent (as timm reports them; top-5 with k = min(5,
      classes)) and ``val_loss``;
    - sequences (``sequences=True``): ``accuracy`` in percent (argmax equals the label) and ``val_loss``;
    - token labels (language models, labels (B, N)): over every scored token (label not
      ``IGNORE_INDEX``), ``val_loss``, ``perplexity`` = exp(val_loss), and ``accuracy`` in percent (the
      argmax is the next token).

    ``val_loss`` is the mean cross-entropy in nats over every held-out sample or scored token (no label
    smoothing).
    """
    model.eval()
    correct1 = correct5 = seen = 0
    loss_sum = 0.0
    per_token = False
    for inputs, labels in batches:
        with autocast_for(device, spec):
            logits = forward(model, inputs)
        per_token = per_token or logits.ndim == 3
        logits, labels = flatten_tokens(logits, labels)
        scored = labels != IGNORE_INDEX
        logits, labels = logits[scored], labels[scored]
        loss_sum += nn.functional.cross_entropy(logits.float(), labels, reduction="sum").item()
        topk = logits.topk(min(5, logits.shape[-1]), dim=-1).indices
        hits = topk == labels[:, None]
        correct1 += hits[:, 0].sum().item()
        correct5 += hits.any(dim=-1).sum().item()
        seen += len(labels)
    model.train()
    if per_token:
        val_loss = loss_sum / seen
        return {"val_loss": val_loss, "perplexity": math.exp(min(val_loss, 700.0)), "accuracy": 100.0 * correct1 / seen}
    if sequences:
        return {"accuracy": 100.0 * correct1 / seen, "val_loss": loss_sum / seen}
    return {"top1": 100.0 * correct1 / seen, "top5": 100.0 * correct5 / seen, "val_loss": loss_sum / seen}
