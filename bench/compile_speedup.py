"""Compiled vs. eager training steps on CPU, and model FLOPs utilisation (MFU) against the fp32 matmul peak.

The step is the trial's own (``workers.train.train_step`` through ``make_context``: AdamW with timm's
weight-decay groups, schedule, label smoothing, gradient clipping) on a ViT-Ti-shaped model (depth 12,
3 heads, width 192, MLP 768) at 32 px with patch 4 (64 tokens and a class token), on a fixed random
batch, so data costs nothing. Variants, each a fresh model with the same initial weights:

- **eager**: ``train.compile`` off;
- **compiled**: ``train.compile`` on (``torch.compile``, Inductor: C++/OpenMP kernels on CPU); its first
  step compiles, and that step's wall time is the trial's ``compile_s``, printed here;
- **channels_last** (``--channels-last``): eager with ``train.channels_last`` (the ViT's only 4-D weight is
  its patch embedding, so little is expected).

Rounds interleave the variants (eager, compiled, …, eager, compiled), ``--steps`` timed steps each after
``--warmup`` untimed ones, so load on a shared machine hits all alike; figures are medians over rounds.

MFU = (training FLOPs per step ÷ seconds per step) ÷ fp32 matmul peak, where training FLOPs per step are
3 × forward FLOPs per sample (``workers.probes.flops``: matmuls and convolutions, FLOPs not MACs; the
backward pass costs about twice the forward) × batch, and the peak is the best of ``--peak-repeats`` timed
N×N float32 ``torch.mm`` (2N³ FLOPs each) at the same thread count, measured at the start of every round:
each round's MFU is taken against its own peak (load on a shared machine slows both alike), and the
figure printed is the median over rounds. Goal: MFU >= 0.75 for this model on CPU.

On a machine shared with other work, wall time counts the time other processes hold the cores, and a
half-second matmul catches a quiet moment more easily than a ten-second step does. So a second figure is
printed beside each: **CPU-time MFU**, the same ratio with the process's CPU seconds ÷ threads in place of
wall seconds, for the steps and for the peak. It counts only the time this process ran (spin-waiting of
its own threads included, so it is not flattering); on a quiet machine the two agree.

If ``torch.compile`` cannot run here (no C++ compiler for Inductor, or a compile error) the bench says so
plainly, prints the eager figures, and exits 0.

    .venv/bin/python bench/compile_speedup.py                 # 2 threads: ~4 min on a quiet 2-core machine
    .venv/bin/python bench/compile_speedup.py --threads 2 --batch-size 128 --channels-last --json /tmp/c.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from workers.config import ModelSpec, TrainSpec
from workers.devices import synchronize
from workers.models import build_model
from workers.probes.flops import forward_flops_per_sample
from workers.train import make_context, seed_everything, train_step

MFU_GOAL = 0.75


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (every variant and the peak)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--img-size", type=int, default=32)
    parser.add_argument("--patch-size", type=int, default=4)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--num-heads", type=int, default=3)
    parser.add_argument("--embed-dim", type=int, default=192)
    parser.add_argument("--mlp-dim", type=int, default=768)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant and round")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per variant and round")
    parser.add_argument("--peak-size", type=int, default=2048, help="N of the N×N fp32 matmul peak")
    parser.add_argument("--peak-repeats", type=int, default=5)
    parser.add_argument("--channels-last", action="store_true", help="also time train.channels_last (eager)")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    return parser.parse_args(argv)


def matmul_peak_flops(size: int, repeats: int, threads: int) -> tuple[float, float]:
    """FLOP/s of the fastest of ``repeats`` float32 ``size``×``size`` matmuls (2·size³ FLOPs each): by wall
    time, and by CPU time (process CPU seconds ÷ ``threads``)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # first call: thread pool and allocator
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        a @ b
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, (time.process_time() - cpu) / threads)
    return 2 * size**3 / best_wall, 2 * size**3 / best_cpu


class Variant:
    """One training setup: a fresh model (same initial weights as every variant) and the trial's step."""

    def __init__(self, name: str, spec: ModelSpec, train: TrainSpec, batch: tuple[torch.Tensor, torch.Tensor]):
        self.name = name
        torch.manual_seed(0)
        self.ctx = make_context(build_model(spec), train, torch.device("cpu"), total_steps=10**9)
        self.ctx.model.train()
        self.inputs, self.labels = batch
        self.seconds_per_step: list[float] = []
        self.cpu_seconds_per_step: list[float] = []  # process CPU seconds per step ÷ threads

    def run(self, warmup: int, steps: int, threads: int) -> None:
        for _ in range(warmup):
            train_step(self.ctx, self.inputs, self.labels)
        synchronize(self.ctx.device)
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(steps):
            train_step(self.ctx, self.inputs, self.labels)
        synchronize(self.ctx.device)
        self.seconds_per_step.append((time.perf_counter() - start) / steps)
        self.cpu_seconds_per_step.append((time.process_time() - cpu_start) / steps / threads)

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds_per_step)


def try_compile(variant: Variant) -> str | None:
    """Run the compiling first step; the error in one line when torch.compile cannot work here."""
    try:
        train_step(variant.ctx, variant.inputs, variant.labels)
    except Exception as exc:  # Inductor's failures come as many types (missing compiler, codegen, OS errors)
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return None


def make_spec_and_batch(args) -> tuple[ModelSpec, tuple[torch.Tensor, torch.Tensor]]:
    spec = ModelSpec(
        depth=args.depth,
        num_heads=args.num_heads,
        embed_dim=args.embed_dim,
        mlp_dim=args.mlp_dim,
        patch_size=args.patch_size,
        img_size=args.img_size,
        num_classes=10,
    )
    generator = torch.Generator().manual_seed(1)
    batch = (
        torch.randn(args.batch_size, 3, args.img_size, args.img_size, generator=generator),
        torch.randint(0, 10, (args.batch_size,), generator=generator),
    )
    return spec, batch


def make_variants(args, spec: ModelSpec, batch) -> tuple[list[Variant], str | None]:
    """Eager, compiled (when it works here, unless --no-compile) and channels_last (with --channels-last);
    the compile error in one line, or None."""
    recipe = TrainSpec(amp_bf16=False, deterministic=False)
    variants = [Variant("eager", spec, recipe, batch)]
    compile_error = None
    if not args.no_compile:
        compiled = Variant("compiled", spec, recipe.model_copy(update={"compile": True}), batch)
        compile_error = try_compile(compiled)
        if compile_error is None:
            variants.append(compiled)
            print(f"compile: {compiled.ctx.compile_s:.1f} s (first step: trace, generate and build C++ kernels)")
        else:
            print(f"torch.compile does NOT work here: {compile_error}\ncontinuing with eager figures only")
    if args.channels_last:
        variants.append(Variant("channels_last", spec, recipe.model_copy(update={"channels_last": True}), batch))
    return variants, compile_error


def run_rounds(args, variants: list[Variant]) -> tuple[list[tuple[float, float]], float, float]:
    """Per round, the matmul peak then every variant's steps; the peaks and the load average before/after."""
    peaks: list[tuple[float, float]] = []  # per round: (wall, CPU-time) FLOP/s
    load_before = os.getloadavg()[0]
    for index in range(args.rounds):
        peaks.append(matmul_peak_flops(args.peak_size, args.peak_repeats, args.threads))
        for variant in variants:
            variant.run(args.warmup, args.steps, args.threads)
        line = "   ".join(f"{v.name} {v.seconds_per_step[-1] * 1e3:7.0f} ms/step" for v in variants)
        print(f"round {index + 1}/{args.rounds}: peak {peaks[-1][0] / 1e9:5.1f} GFLOP/s   {line}", flush=True)
    return peaks, load_before, os.getloadavg()[0]


def variant_figures(args, variants: list[Variant], peaks: list[tuple[float, float]], step_flops: float) -> dict:
    """Print and return each variant's step times and MFU (median over rounds, against each round's peak)."""
    print(f"fp32 matmul peak ({args.peak_size}² mm, best of {args.peak_repeats}) per round, wall / CPU time: "
          + ", ".join(f"{wall / 1e9:.1f} / {cpu / 1e9:.1f}" for wall, cpu in peaks) + " GFLOP/s")  # fmt: skip
    figures: dict = {"peak_flops_per_s": peaks, "step_flops": step_flops, "variants": {}}
    for variant in variants:
        rate = step_flops / variant.median_s
        mfu = statistics.median(step_flops / s / p[0] for s, p in zip(variant.seconds_per_step, peaks, strict=True))
        cpu_mfu = statistics.median(
            step_flops / s / p[1] for s, p in zip(variant.cpu_seconds_per_step, peaks, strict=True)
        )
        figures["variants"][variant.name] = {
            "s_per_step": variant.seconds_per_step,
            "cpu_s_per_step": variant.cpu_seconds_per_step,
            "mfu": mfu,
            "cpu_time_mfu": cpu_mfu,
        }
        print(f"{variant.name:14s} {variant.median_s * 1e3:8.0f} ms/step  {args.batch_size / variant.median_s:7.1f} "
              f"samples/s  {rate / 1e9:6.1f} GFLOP/s  MFU {mfu:.2f}  CPU-time MFU {cpu_mfu:.2f} "
              f"(goal >= {MFU_GOAL})")  # fmt: skip
    return figures


def report_compile_speedup(variants: list[Variant], compile_error: str | None, figures: dict) -> None:
    """Print the compiled-vs-eager ratio (or why there is none) and add it to ``figures``."""
    if len(variants) > 1 and variants[1].name == "compiled":
        ratio = variants[0].median_s / variants[1].median_s
        cpu_ratio = statistics.median(variants[0].cpu_seconds_per_step) / statistics.median(
            variants[1].cpu_seconds_per_step
        )
        compile_s = variants[1].ctx.compile_s
        saved_s = variants[0].median_s - variants[1].median_s  # per step
        repaid = f", repaid after {compile_s / saved_s:.0f} steps" if saved_s > 0 else ""
        print(f"compiled vs eager: {ratio:.2f}x step speed (eager s/step ÷ compiled s/step; by CPU time "
              f"{cpu_ratio:.2f}x); compile {compile_s:.1f} s{repaid}")  # fmt: skip
        figures.update(compile_speedup=ratio, compile_speedup_cpu_time=cpu_ratio, compile_s=compile_s)
    if compile_error:
        print("compiled vs eager: not measured, torch.compile does not work on this machine")
        figures["compile_error"] = compile_error


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    seed_everything(0, deterministic=False)
    spec, batch = make_spec_and_batch(args)
    step_flops = 3 * forward_flops_per_sample(spec) * args.batch_size
    print(
        f"cpu, {args.threads} threads, torch {torch.__version__}; ViT depth {args.depth} heads {args.num_heads} "
        f"width {args.embed_dim} mlp {args.mlp_dim}, {args.img_size} px patch {args.patch_size}, batch "
        f"{args.batch_size}: {step_flops / 1e9:.1f} GFLOP per training step",
        flush=True,
    )
    variants, compile_error = make_variants(args, spec, batch)
    peaks, load_before, load_after = run_rounds(args, variants)
    figures = variant_figures(args, variants, peaks, step_flops)
    report_compile_speedup(variants, compile_error, figures)
    if max(load_before, load_after) > (os.cpu_count() or 1):
        print(f"note: busy machine (load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs): "
              "every figure is low and noisy; rerun when it is quiet", file=sys.stderr)  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(figures | {"args": vars(args) | {"json": str(args.json)}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
