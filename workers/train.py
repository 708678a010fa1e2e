"""The training loop, split into its parts: seeding, optimiser and schedule, one step, one epoch, evaluation.

Recipe: AdamW (no weight decay on biases, norms, tokens and position embeddings, as timm does), linear
warm-up then cosine decay of the learning rate per step, label-smoothed cross-entropy (plus λ · a
conditioning penalty when the model has one, ``workers/conditioning.py``; ``train_loss`` stays the
cross-entropy), gradient clipping by global 2-norm, and bf16 autocast on CUDA.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
from timm.optim import param_groups_weight_decay
from torch import nn

from workers.batch import Inputs, forward
from workers.conditioning import clear as clear_conditioning
from workers.conditioning import penalty as conditioning_penalty
from workers.config import TrainSpec
from workers.devices import synchronize
from workers.metrics import IMAGE_METRICS, LANGUAGE_MODEL_METRICS, SEQUENCE_CLASSIFICATION_METRICS

log = logging.getLogger("workers.train")


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite."""


def seed_everything(seed: int, deterministic: bool, cuda: bool | None = None) -> None:
    """Seed Python, NumPy and torch; with ``deterministic``, ask torch for deterministic kernels.

    Deterministic means: ``torch.use_deterministic_algorithms(True, warn_only=True)``, cuDNN's autotuner
    off, and on CUDA (``cuda``; None: whenever CUDA is available) a fixed cuBLAS workspace,
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (:func:`cublas_determinism_env`), which cuBLAS needs for
    reproducible matmuls. Call it before any CUDA work: torch reads that variable when it first creates a
    cuBLAS handle in the process. Not deterministic even so, and said so: an op torch has no deterministic
    kernel for still runs, with torch's warning naming it (``warn_only``, so a trial is not lost to it); a
    process whose CUDA started before the variable was set (logged as a warning); and a variable the user
    set to another value (theirs is kept).
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        cuda = torch.cuda.is_available() if cuda is None else cuda
        env = cublas_determinism_env(deterministic, cuda, os.environ)
        if env and torch.cuda.is_initialized():
            log.warning("CUDA started before CUBLAS_WORKSPACE_CONFIG was set: cuBLAS may not be deterministic here")
        elif cuda and not env and os.environ["CUBLAS_WORKSPACE_CONFIG"] not in CUBLAS_DETERMINISTIC_CONFIGS:
            log.warning(
                "CUBLAS_WORKSPACE_CONFIG=%s is not one cuBLAS is deterministic with (%s): kept, not deterministic",
                os.environ["CUBLAS_WORKSPACE_CONFIG"],
                " or ".join(CUBLAS_DETERMINISTIC_CONFIGS),
            )
        os.environ.update(env)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


# cuBLAS's reproducibility rule (NVIDIA cuBLAS docs, "Results reproducibility"; torch's "Reproducibility"
# notes): one fixed workspace per stream. ":4096:8" is eight 4 MiB buffers (":16:8", eight 16 KiB, also
# works and may be slower).
CUBLAS_WORKSPACE_CONFIG = ":4096:8"
CUBLAS_DETERMINISTIC_CONFIGS = (":4096:8", ":16:8")


def cublas_determinism_env(deterministic: bool, cuda: bool, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables to set so cuBLAS is deterministic: ``{"CUBLAS_WORKSPACE_CONFIG":
    ":4096:8"}`` when ``deterministic``, CUDA is in use and ``environ`` has no value for it yet; otherwise
    none (a value already there is kept: the user's choice)."""
    if not (deterministic and cuda) or environ.get("CUBLAS_WORKSPACE_CONFIG"):
        return {}
    return {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE_CONFIG}


def make_optimizer(model: nn.Module, spec: TrainSpec) -> torch.optim.AdamW:
    """AdamW with timm's weight-decay groups (``timm.optim.param_groups_weight_decay``, as timm's
    ``create_optimizer_v2`` builds them): no weight decay on a parameter that is 1-D (biases, norm scales)
    or named ``*.bias``, or whose name matches a pattern in the model's ``no_weight_decay()`` (fnmatch
    wildcards, e.g. XCiT's ``pos_embed.*``: its whole positional-encoding module); ``spec.weight_decay`` on
    every other trainable parameter. Models without ``no_weight_decay`` (HF ones) get the 1-D rule alone.
    With ``weight_decay`` 0 every parameter is in one group.

    Fused (one kernel for every parameter's update) when :func:`use_fused_adamw` says so: CUDA only."""
    no_weight_decay = set(getattr(model, "no_weight_decay", lambda: set())())
    groups = param_groups_weight_decay(model, spec.weight_decay, no_weight_decay_list=no_weight_decay)
    fused = use_fused_adamw(p.device for p in model.parameters() if p.requires_grad)
    return torch.optim.AdamW(groups, lr=spec.lr, **({"fused": True} if fused else {}))


def use_fused_adamw(devices) -> bool:
    """Fused AdamW when there are parameters and every one is on CUDA. Elsewhere torch's default update
    (for-each on CPU) stays: the fused CPU kernel is newer and gains little at these sizes."""
    devices = list(devices)
    return bool(devices) and all(torch.device(device).type == "cuda" for device in devices)


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
    """What a training step needs; built once per trial.

    ``step_model`` is what a training step calls: ``torch.compile(model)`` with ``train.compile``, else
    ``model`` itself. Both share the parameters; evaluation, probes and checkpoints use ``model`` (eager, and
    its ``state_dict`` keys unchanged). The counters after ``step`` cover this process's training (a resumed
    trial: since the resume); ``workers.trial`` sums them over a trial's attempts into the record's
    ``data_wait_fraction`` and ``compile_s``."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    loss_fn: nn.Module
    device: torch.device
    spec: TrainSpec
    total_steps: int
    step: int = 0  # optimizer steps taken so far
    step_model: nn.Module | None = None  # None: model
    compile_s: float | None = None  # wall seconds of the first compiled step; None until it ran (or no compile)
    steady_s: float = 0.0  # wall seconds of the steady-state windows (train_one_epoch's timed_s), summed
    data_wait_s: float = 0.0  # of which blocked in next(batches), summed

    def data_wait_fraction(self) -> float | None:
        """``data_wait_s / steady_s``: the share of steady-state training time spent blocked waiting for the
        next batch (see :func:`train_one_epoch`); None before any steady-state step."""
        return self.data_wait_s / self.steady_s if self.steady_s > 0 else None


def make_context(model: nn.Module, spec: TrainSpec, device: torch.device, total_steps: int) -> TrainContext:
    """The step's parts for ``model`` (already on ``device``). ``spec.channels_last`` converts the model's
    4-D weights first (before the optimiser sees them); ``spec.compile`` wraps it in ``torch.compile``, which
    compiles lazily, at the first training step (timed into ``compile_s``)."""
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = make_optimizer(model, spec)
    return TrainContext(
        model=model,
        optimizer=optimizer,
        scheduler=make_scheduler(optimizer, total_steps, spec),
        loss_fn=nn.CrossEntropyLoss(label_smoothing=spec.label_smoothing, ignore_index=IGNORE_INDEX),
        device=device,
        spec=spec,
        total_steps=total_steps,
        step_model=torch.compile(model) if spec.compile else model,
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
    models), where ``IGNORE_INDEX`` marks tokens that are not scored: the loss is the mean over the rest.

    With ``train.compile`` the first step compiles the forward and backward graphs: ``ctx.compile_s`` is that
    step's wall time, device synchronised at both ends (Dynamo tracing and Inductor code generation, plus
    one step's compute, negligible beside them). A later recompilation (a new input shape; the training
    batches have one shape) would count in training time but not in ``compile_s``."""
    if ctx.spec.compile and ctx.compile_s is None:
        synchronize(ctx.device)
        start = time.perf_counter()
        loss = _train_step(ctx, inputs, labels)
        synchronize(ctx.device)
        ctx.compile_s = time.perf_counter() - start
        return loss
    return _train_step(ctx, inputs, labels)


def _train_step(ctx: TrainContext, inputs: Inputs, labels: torch.Tensor) -> torch.Tensor:
    """The step itself. With a conditioning penalty (``workers/conditioning.py``) the gradient is that of
    task loss + λ · penalty; the returned loss, and so ``train_loss``, is the task loss alone."""
    if ctx.spec.channels_last and isinstance(inputs, torch.Tensor) and inputs.ndim == 4:
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    ctx.optimizer.zero_grad(set_to_none=True)  # before the forward: last step's gradients are not kept alive
    model = ctx.model if ctx.step_model is None else ctx.step_model
    clear_conditioning(ctx.model)  # no block recorded by an earlier forward enters this step's penalty
    with autocast_for(ctx.device, ctx.spec):
        loss = ctx.loss_fn(*flatten_tokens(forward(model, inputs), labels))
    extra = conditioning_penalty(ctx.model)  # λ · penalty on A, or None (workers/conditioning.py)
    (loss if extra is None else loss + extra).backward()
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
    data_wait_s: float = 0.0  # of timed_s, seconds blocked in next(batches) (train_one_epoch's definition)

    @property
    def data_wait_fraction(self) -> float | None:
        return self.data_wait_s / self.timed_s if self.timed_s > 0 else None


# How often the loss is checked for NaN/inf: each check synchronises the device, so not every step.
DIVERGENCE_CHECK_EVERY_STEPS = 20


def train_one_epoch(ctx: TrainContext, batches, warmup_steps_left: int) -> EpochStats:
    """Train on every batch of ``batches`` (stopping at the step budget).

    Steps after the first ``warmup_steps_left`` are timed as the steady state for throughput: the clock
    starts after synchronising the device, just before the first such step fetches its batch, and stops
    after synchronising at the end of the epoch (so the window holds each timed step's fetch and compute,
    and the final fetch that ends the epoch). With ``train.compile`` the compiling step is always warm-up.

    ``data_wait_s``: of that window, the wall seconds spent inside ``next()`` on ``batches``, that is,
    blocked until the next batch is there (a DataLoader's queue, or cutting a batch from resident tensors;
    for a DataLoader it includes copying the batch to the device). ``data_wait_s / timed_s`` is the data
    wait fraction: near 0 when data is ready before the step needs it, near 1 for a loader-bound trial. On
    CUDA steps run asynchronously, so a wait that overlaps queued GPU work also counts: an upper bound on the
    throughput lost to data, and exact when the loader is the bottleneck (the GPU queue then runs dry).
    The context's ``steady_s`` and ``data_wait_s`` gather both across epochs.
    Raises :class:`DivergedError` on a non-finite loss.
    """
    ctx.model.train()
    if ctx.spec.compile and ctx.compile_s is None:
        warmup_steps_left = max(warmup_steps_left, 1)  # compile time stays out of the throughput window
    loss_sum = torch.zeros((), device=ctx.device)
    steps = timed_samples = 0
    timer_start = None
    data_wait_s = 0.0
    lr = ctx.optimizer.param_groups[0]["lr"]
    iterator = iter(batches)
    while ctx.step < ctx.total_steps:
        if steps == warmup_steps_left:
            synchronize(ctx.device)
            timer_start = time.perf_counter()
        fetch_start = time.perf_counter()
        batch = next(iterator, None)
        if timer_start is not None:
            data_wait_s += time.perf_counter() - fetch_start
        if batch is None:
            break
        inputs, labels = batch
        lr = ctx.optimizer.param_groups[0]["lr"]
        loss_sum += train_step(ctx, inputs, labels)
        steps += 1
        if timer_start is not None:
            timed_samples += len(labels)
        if steps % DIVERGENCE_CHECK_EVERY_STEPS == 0:
            check_finite(loss_sum, ctx.step)
    return finish_epoch(ctx, loss_sum, steps, lr, timed_samples, timer_start, data_wait_s)


def finish_epoch(
    ctx: TrainContext,
    loss_sum: torch.Tensor,
    steps: int,
    lr: float,
    timed_samples: int,
    timer_start: float | None,
    data_wait_s: float,
) -> EpochStats:
    """Close the epoch's timed window (device synchronised), check the loss, add the window's seconds to
    the context's ``steady_s`` and ``data_wait_s``, and return the epoch's stats (mean loss per step)."""
    synchronize(ctx.device)
    timed_s = time.perf_counter() - timer_start if timer_start is not None else 0.0
    check_finite(loss_sum, ctx.step)
    if timed_samples == 0:  # no timed step ran: an empty window says nothing about steady state
        timed_s = data_wait_s = 0.0
    ctx.steady_s += timed_s
    ctx.data_wait_s += data_wait_s
    return EpochStats(loss_sum.item() / max(steps, 1), steps, lr, timed_samples, timed_s, data_wait_s)


def check_finite(loss_sum: torch.Tensor, step: int) -> None:
    if not torch.isfinite(loss_sum).item():
        raise DivergedError(f"training loss became {loss_sum.item()} by step {step}")


@torch.no_grad()
def evaluate(model: nn.Module, batches, device: torch.device, spec: TrainSpec, sequences: bool = False) -> dict:
    """Held-out scores on ``batches``, under the names ``workers/metrics.py`` lists for the task
    (``IMAGE_METRICS``, ``SEQUENCE_CLASSIFICATION_METRICS``, ``LANGUAGE_MODEL_METRICS``), in that order:

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
    val_loss = loss_sum / seen
    values = {  # every metric this loop can score; the task's list in workers/metrics.py picks its own
        "top1": 100.0 * correct1 / seen,
        "top5": 100.0 * correct5 / seen,
        "accuracy": 100.0 * correct1 / seen,
        "val_loss": val_loss,
        "perplexity": math.exp(min(val_loss, 700.0)),
    }
    names = LANGUAGE_MODEL_METRICS if per_token else SEQUENCE_CLASSIFICATION_METRICS if sequences else IMAGE_METRICS
    return {name: values[name] for name in names}
