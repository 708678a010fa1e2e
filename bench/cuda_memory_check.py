"""The peak-memory probe on CUDA beside the allocator's absolute peak, and peak memory against batch size.

``workers.probes.memory.peak_train_step_memory`` defines a training step's peak as S + P: the bytes of the
step's own inputs (parameters, AdamW state, batch) plus the allocator's peak growth during the step. In a
process that holds nothing else, the allocator's absolute peak over the same step
(``torch.cuda.max_memory_allocated`` after the probe's own reset) counts the same tensors by another route,
so their ratio should be just under 1 (the absolute peak also holds cuBLAS's workspace and the few small
tensors a step leaves behind).

For each ``--batch-sizes`` value, a fresh ViT-B/16 (timm's shape, 86.6M parameters) trained with the
trial's step (``workers.train.train_step``: bf16 autocast, fused AdamW, gradient clipping) for two steps so
AdamW's state exists, gradients set to None, then one measured step. Printed per batch: the probe, the
absolute peak, their ratio, and bytes per parameter. Then a straight line through (batch, probe): its
intercept is what the step needs at batch 0 (16 B/param: fp32 weight, gradient and AdamW's two moments),
its slope the activations per sample.

Needs CUDA: without it, it says so and exits 0 (the CPU path of the probe is checked by the test suite
against a whole-process measurement, tests/workers/probes/test_probes_truth.py).

    .venv/bin/python bench/cuda_memory_check.py                       # batches 32, 128, 256: ~30 s
    .venv/bin/python bench/cuda_memory_check.py --batch-sizes 64,128 --json /tmp/mem.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from workers.config import TrainSpec
from workers.gpu_check import CUDA_MODE, generated_batch
from workers.models import build_model
from workers.probes.memory import peak_train_step_memory, training_step_tensors
from workers.train import make_context, train_step

BYTES_PER_PARAM_STATE = 16  # fp32 weight + gradient + AdamW exp_avg and exp_avg_sq


def measure(batch: int, device: torch.device) -> dict:
    """Probe and absolute allocator peak of one training step at ``batch``, in a fresh model."""
    spec = CUDA_MODE.spec
    model = build_model(spec).to(device)
    ctx = make_context(model, TrainSpec(batch_size=batch, warmup_steps=0, amp_bf16=True), device, total_steps=10**9)
    images, labels = generated_batch(spec, batch, device, seed=1)
    for _ in range(2):  # AdamW's state exists from the first step on
        train_step(ctx, images, labels)
    ctx.optimizer.zero_grad(set_to_none=True)
    held = training_step_tensors(ctx.model, ctx.optimizer, [images, labels])
    probe, method = peak_train_step_memory(lambda: train_step(ctx, images, labels), device, held)
    absolute = torch.cuda.max_memory_allocated(device)  # reset by the probe at the step's start
    params = sum(p.numel() for p in model.parameters())
    return {"batch": batch, "probe_bytes": probe, "allocator_peak_bytes": absolute, "params": params, "method": method}


def fit_line(rows: list[dict]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of probe bytes against batch size."""
    xs, ys = [r["batch"] for r in rows], [r["probe_bytes"] for r in rows]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="32,128,256", help="comma-separated training batch sizes")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("cuda_memory_check: no CUDA device visible; nothing to measure (the CPU probe is tested in make test)")
        return 0
    device = torch.device("cuda")
    rows = []
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        rows.append(measure(batch, device))
        torch.cuda.empty_cache()
        r = rows[-1]
        print(
            f"batch {batch:4d}: probe {r['probe_bytes'] / 2**30:7.3f} GiB, allocator peak "
            f"{r['allocator_peak_bytes'] / 2**30:7.3f} GiB, ratio {r['probe_bytes'] / r['allocator_peak_bytes']:.4f}, "
            f"{r['probe_bytes'] / r['params']:.1f} B/param",
            flush=True,
        )
    figures = {"rows": rows}
    if len(rows) > 1:
        intercept, slope = fit_line(rows)
        floor = BYTES_PER_PARAM_STATE * rows[0]["params"]
        figures.update(intercept_bytes=intercept, activation_bytes_per_sample=slope, state_floor_bytes=floor)
        print(
            f"line through (batch, probe): {intercept / 2**30:.3f} GiB at batch 0 "
            f"(16 B/param: {floor / 2**30:.3f} GiB, ratio {intercept / floor:.3f}) + "
            f"{slope / 2**20:.1f} MiB per sample"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
