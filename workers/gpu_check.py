"""`make gpu-check` (or `sweep gpu-check`): one short run that shows what this machine's accelerator does
with the trial's own code, for the day a GPU is there.

**CUDA mode** (a GPU is visible, or ``--device cuda``), one GPU, well under 5 minutes: ViT-B/16 at 224 px
(timm's ``vit_base_patch16_224`` shape: depth 12, 12 heads of 64, width 768, MLP 3072, 1000 classes,
86.6M parameters), random initialisation (nothing downloads), trained with bf16 autocast on a generated
batch (Gaussian images, uniform labels, made on the device: data costs nothing).

**CPU mode** (no CUDA, or ``--device cpu``): the same steps on a tiny ViT (depth 2, 4 heads, width 64,
MLP 128, 32 px, patch 4) in fp32, in seconds. It says plainly that its figures say nothing about a GPU;
it exists so the check runs in ``make test`` and cannot rot.

Every figure comes from the code a trial runs:

- **matmul peak**: the fastest of ``--peak-repeats`` windows of ``--peak-matmuls`` N×N @ N×N matmuls in the
  run's precision (bf16 on CUDA, N = 8192; fp32 on CPU, N = 1024), 2·N³ FLOPs each, device synchronised at
  both ends of each window, after untimed ones. Measured in the same run as the model, on the same device.
- **training**: ``workers.train.train_step`` (AdamW with timm's weight-decay groups, fused on CUDA;
  label smoothing, gradient clipping, bf16 autocast on CUDA) on one fixed generated batch; ``--steps``
  timed steps after ``--warmup`` untimed ones, device synchronised at both ends: samples/s.
- **MFU** = 3 × forward FLOPs per sample (``workers.probes.flops``: matmuls and convolutions, FLOPs not
  MACs; the backward pass costs about twice the forward) × training samples/s ÷ the matmul peak.
- **peak memory**: ``workers.probes.memory.peak_train_step_memory`` on one more training step (parameters,
  gradients, optimiser state, activations, temporaries and the batch; that module has the definition).
- **κ**: ``workers.probes.kappa.kappa_per_layer`` on the first ``--kappa-samples`` images of the batch
  (κ of the attention block per layer, float64); mean over layers of the per-layer medians, and max.
- **inference**: ``workers.probes.throughput.inference_throughput`` at ``--infer-batch-size`` and
  ``batch1_latency_ms`` (median over passes), in the training precision.

Checks (exit 1 when one fails): the training loss is finite; 0 < MFU ≤ 1 (above 1, the peak or the FLOP
count is wrong); peak memory ≥ 16 bytes per parameter (fp32 weights, gradients and AdamW's two moments
are all live during the step); every layer's κ is finite and ≥ 1.

    make gpu-check                         # CUDA if visible, else the CPU mode
    sweep gpu-check --device cpu --json /tmp/gpu_check.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field

import torch

from workers.config import ModelSpec, TrainSpec
from workers.devices import synchronize
from workers.gpu_check_options import add_options
from workers.models import build_model
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer, summarise_kappa
from workers.probes.memory import peak_train_step_memory, training_step_tensors
from workers.probes.throughput import batch1_latency_ms, inference_throughput
from workers.train import autocast_for, make_context, seed_everything, train_step

BYTES_PER_PARAM_FLOOR = 16  # fp32 weight + gradient + AdamW's exp_avg and exp_avg_sq, all live in the step


@dataclass(frozen=True)
class Mode:
    """What one mode measures: the model, the batch sizes and the matmul peak's precision and size."""

    name: str
    spec: ModelSpec
    dtype: torch.dtype  # of the matmul peak, and of the training autocast on CUDA
    batch_size: int
    infer_batch_size: int
    peak_size: int  # N of the N×N matmuls
    peak_matmuls: int  # per timed window
    steps: int  # timed training steps (after `warmup` untimed ones)
    warmup: int
    infer_steps: int  # timed inference passes
    latency_iters: int  # timed batch-1 passes
    kappa_samples: int


CUDA_MODE = Mode(
    name="cuda",
    spec=ModelSpec(depth=12, num_heads=12, embed_dim=768, mlp_dim=3072, patch_size=16, img_size=224),
    dtype=torch.bfloat16,
    batch_size=128,
    infer_batch_size=256,
    peak_size=8192,
    peak_matmuls=20,  # ~1 ms each on a recent GPU: a window long enough to time
    steps=30,
    warmup=5,
    infer_steps=20,
    latency_iters=50,
    kappa_samples=8,
)
CPU_MODE = Mode(
    name="cpu",
    spec=ModelSpec(depth=2, num_heads=4, embed_dim=64, mlp_dim=128, patch_size=4, img_size=32, num_classes=10),
    dtype=torch.float32,
    batch_size=16,
    infer_batch_size=32,
    peak_size=1024,
    peak_matmuls=2,  # ~20-40 ms each on 2 cores
    steps=5,
    warmup=1,
    infer_steps=3,
    latency_iters=5,
    kappa_samples=4,
)


@dataclass
class Figures:
    device: str
    mode: str
    params: int = 0
    forward_flops_per_sample: int = 0
    batch_size: int = 0
    peak_flops_per_s: float = 0.0
    train_samples_per_s: float = 0.0
    train_loss: float = math.nan
    compile_s: float | None = None
    mfu: float = 0.0
    peak_mem_bytes: int | None = None
    peak_mem_method: str = ""
    kappa_mean: float = math.nan
    kappa_max: float = math.nan
    kappa_layers: int = 0
    kappa_s: float = 0.0
    infer_batch_size: int = 0
    infer_samples_per_s: float = 0.0
    latency_b1_ms: float = 0.0
    wall_s: float = 0.0
    checks: list[dict] = field(default_factory=list)


def choose_mode(device_name: str) -> tuple[torch.device, Mode]:
    """The device and its mode; a CUDA device asked for but not visible is an error (ValueError)."""
    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device_name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device_name}: no CUDA device is visible (torch {torch.__version__})")
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"--device {device_name}: the check runs on cuda or cpu")
    return device, CUDA_MODE if device.type == "cuda" else CPU_MODE


def matmul_peak_flops(device: torch.device, dtype: torch.dtype, size: int, matmuls: int, repeats: int) -> float:
    """FLOP/s of the fastest of ``repeats`` windows of ``matmuls`` size×size @ size×size matmuls in ``dtype``
    (2·size³ FLOPs each), device synchronised at both ends of each window, after two untimed matmuls."""
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=generator)
    out = torch.empty(size, size, device=device, dtype=dtype)
    for _ in range(2):  # cuBLAS heuristics, the CPU thread pool, the allocator
        torch.mm(a, b, out=out)
    best = math.inf
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(matmuls):
            torch.mm(a, b, out=out)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 * matmuls / best


def generated_batch(spec: ModelSpec, size: int, device: torch.device, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian images (size, 3, img, img) and uniform labels, made on ``device``."""
    generator = torch.Generator(device=device).manual_seed(seed)
    images = torch.randn(size, spec.in_chans, spec.img_size, spec.img_size, device=device, generator=generator)
    labels = torch.randint(0, spec.num_classes, (size,), device=device, generator=generator)
    return images, labels


SETTINGS = ("batch_size", "infer_batch_size", "peak_size", "peak_matmuls", "steps", "warmup", "infer_steps",
            "latency_iters", "kappa_samples")  # fmt: skip


def settings(args: argparse.Namespace, mode: Mode) -> argparse.Namespace:
    """``args`` with every setting left out taken from ``mode``."""
    filled = {name: getattr(mode, name) if getattr(args, name) is None else getattr(args, name) for name in SETTINGS}
    return argparse.Namespace(**{**vars(args), **filled})


def measure(args: argparse.Namespace, device: torch.device, mode: Mode) -> Figures:
    """Every figure of the module docstring, in its order; ``args`` as :func:`settings` fills them."""
    started = time.perf_counter()
    seed_everything(0, deterministic=False)  # fastest kernels: a speed check, not a reproducible trial
    figures = Figures(device=describe(device), mode=mode.name)
    spec = mode.spec
    figures.batch_size, figures.infer_batch_size = args.batch_size, args.infer_batch_size
    figures.peak_flops_per_s = matmul_peak_flops(
        device, mode.dtype, args.peak_size, args.peak_matmuls, args.peak_repeats
    )
    figures.forward_flops_per_sample = forward_flops_per_sample(spec)
    train_spec = TrainSpec(batch_size=figures.batch_size, warmup_steps=0, amp_bf16=True, compile=args.compile)
    model = build_model(spec).to(device)
    figures.params = sum(p.numel() for p in model.parameters())
    ctx = make_context(model, train_spec, device, total_steps=10**9)
    images, labels = generated_batch(spec, figures.batch_size, device, seed=1)
    train(figures, ctx, images, labels, args)
    figures.mfu = 3 * figures.forward_flops_per_sample * figures.train_samples_per_s / figures.peak_flops_per_s
    ctx.optimizer.zero_grad(set_to_none=True)  # the probe's step allocates (and counts) its own gradients
    held = training_step_tensors(ctx.model, ctx.optimizer, [images, labels])
    figures.peak_mem_bytes, figures.peak_mem_method = peak_train_step_memory(
        lambda: train_step(ctx, images, labels), device, held
    )
    kappa_rows = probe_kappa(figures, spec, ctx.model, images[: args.kappa_samples], device)
    infer_images, _ = generated_batch(spec, figures.infer_batch_size, device, seed=2)
    autocast = lambda: autocast_for(device, train_spec)  # noqa: E731 (the probes take a factory)
    figures.infer_samples_per_s = inference_throughput(ctx.model, infer_images, 2, args.infer_steps, autocast)
    figures.latency_b1_ms = batch1_latency_ms(ctx.model, infer_images[:1], 3, args.latency_iters, autocast)
    figures.wall_s = time.perf_counter() - started
    figures.checks = run_checks(figures, kappa_rows)
    return figures


def train(figures: Figures, ctx, images: torch.Tensor, labels: torch.Tensor, args: argparse.Namespace) -> None:
    """Warm-up steps (the compiling one among them with ``--compile``), then the timed window."""
    for _ in range(max(args.warmup, 1 if args.compile else 0)):
        train_step(ctx, images, labels)
    synchronize(ctx.device)
    start = time.perf_counter()
    loss_sum = torch.zeros((), device=ctx.device)
    for _ in range(args.steps):
        loss_sum += train_step(ctx, images, labels)
    synchronize(ctx.device)
    elapsed = time.perf_counter() - start
    figures.train_samples_per_s = args.steps * len(labels) / elapsed
    figures.train_loss = loss_sum.item() / args.steps
    figures.compile_s = getattr(ctx, "compile_s", None)


def probe_kappa(figures: Figures, spec: ModelSpec, model, images: torch.Tensor, device: torch.device) -> list[dict]:
    start = time.perf_counter()
    rows = kappa_per_layer(spec, model, images)
    synchronize(device)
    figures.kappa_s = time.perf_counter() - start
    summary = summarise_kappa(rows)
    figures.kappa_mean, figures.kappa_max, figures.kappa_layers = summary["kappa_mean"], summary["kappa_max"], len(rows)
    return rows


def run_checks(figures: Figures, kappa_rows: list[dict]) -> list[dict]:
    """The module docstring's checks, each {check, ok, value}."""
    floor = BYTES_PER_PARAM_FLOOR * figures.params
    kappas = [value for row in kappa_rows for value in (row["kappa"], row["kappa_max"])]
    checks = [
        ("training loss is finite", math.isfinite(figures.train_loss), f"{figures.train_loss:.4f}"),
        ("0 < MFU <= 1", 0.0 < figures.mfu <= 1.0, f"{figures.mfu:.3f}"),
        (
            f"peak memory >= {BYTES_PER_PARAM_FLOOR} B/param",
            figures.peak_mem_bytes is not None and figures.peak_mem_bytes >= floor,
            f"{(figures.peak_mem_bytes or 0) / max(figures.params, 1):.1f} B/param",
        ),
        (
            "every layer's κ finite and >= 1",
            bool(kappas) and all(math.isfinite(k) and k >= 1.0 for k in kappas),
            f"{len(kappa_rows)} layers",
        ),
    ]
    return [{"check": name, "ok": bool(ok), "value": value} for name, ok, value in checks]


def describe(device: torch.device) -> str:
    if device.type != "cuda":
        return f"cpu, {torch.get_num_threads()} threads, torch {torch.__version__}"
    props = torch.cuda.get_device_properties(device)
    return (
        f"{props.name} (compute capability {props.major}.{props.minor}, {props.total_memory / 2**30:.1f} GiB), "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    )


def summary_lines(figures: Figures, mode: Mode, args: argparse.Namespace) -> list[str]:
    """The one-screen summary."""
    spec, precision = mode.spec, "bf16 autocast" if mode.name == "cuda" else "fp32"
    peak_label = f"{'bf16' if mode.dtype == torch.bfloat16 else 'fp32'} matmul peak"
    why = "NO CUDA DEVICE" if not torch.cuda.is_available() else "CPU ASKED FOR (--device cpu)"
    lines = [] if mode.name == "cuda" else [
        f"{why}: this is the reduced CPU check (a tiny ViT in fp32, MFU against the fp32 matmul peak).",
        "It shows that the check's code runs; its figures say nothing about a GPU. Run it on a GPU machine.",
    ]  # fmt: skip
    lines += [
        f"gpu-check ({mode.name} mode) on {figures.device}",
        f"model: ViT depth {spec.depth} × {spec.num_heads} heads, width {spec.embed_dim}, MLP {spec.mlp_dim}, "
        f"{spec.img_size} px patch {spec.patch_size}: {figures.params / 1e6:.2f}M params, "
        f"{figures.forward_flops_per_sample / 1e9:.3g} GFLOP forward per image; {precision}, "
        f"batch {figures.batch_size}, generated images{', compiled' if args.compile else ''}",
        f"  {peak_label:<32} {figures.peak_flops_per_s / 1e12:10.3f} TFLOP/s",
        f"  {'training':<32} {figures.train_samples_per_s:10.1f} samples/s  "
        f"{3 * figures.forward_flops_per_sample * figures.train_samples_per_s / 1e12:.3f} TFLOP/s  "
        f"MFU {figures.mfu:.3f}" + (f"  (compile {figures.compile_s:.1f} s)" if figures.compile_s else ""),
        f"  {'peak memory, one training step':<32} {(figures.peak_mem_bytes or 0) / 2**30:10.3f} GiB  "
        f"({figures.peak_mem_method})",
        f"  {'κ of the attention block':<32} mean {figures.kappa_mean:.4g}, max {figures.kappa_max:.4g} "
        f"({figures.kappa_layers} layers, {args.kappa_samples} images, {figures.kappa_s:.2f} s)",
        f"  {'inference':<32} {figures.infer_samples_per_s:10.1f} samples/s (batch {figures.infer_batch_size})",
        f"  {'batch-1 latency':<32} {figures.latency_b1_ms:10.3f} ms (median)",
        f"  {'wall':<32} {figures.wall_s:10.1f} s",
    ]
    passed = sum(check["ok"] for check in figures.checks)
    lines.append(f"checks: {passed} of {len(figures.checks)} passed")
    lines += [f"  FAILED: {c['check']} ({c['value']})" for c in figures.checks if not c["ok"]]
    return lines


def run(args: argparse.Namespace) -> int:
    """Measure, print the summary, write ``--json``; 0 when every check passed, 1 when one failed, 2 for
    an unusable ``--device``."""
    try:
        device, mode = choose_mode(args.device)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if mode.name == "cpu":
        print("[gpu-check] CPU mode: the reduced check, in seconds", file=sys.stderr)
    args = settings(args, mode)
    figures = measure(args, device, mode)
    print("\n".join(summary_lines(figures, mode, args)))
    if args.json:
        args.json.write_text(json.dumps(vars(figures), indent=2))
    return 0 if all(check["ok"] for check in figures.checks) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    add_options(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
