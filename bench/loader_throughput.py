"""Loader throughput against model step throughput: is an ImageNet-style trial fed fast enough?

Generates an ImageNet-style class folder (``train/<class>/*.jpg``, ``val/<class>/*.jpg``; JPEG through PIL,
``--image-px`` × ``--image-px`` × 3/4 px, smooth colour fields plus noise so they compress like photographs)
in a temporary directory, then measures two rates in samples/s:

- **loader**: ``workers.data.imagefolder.FolderBatches`` (the trial's loader: timm's training transform, a
  random-resized crop to ``--img-size``, flip, colour jitter, normalisation, batches of ``--batch-size``)
  iterated alone, nothing else in the loop, for each worker count in ``--workers`` (default: 0 and the
  trial default for this machine's CPUs, ``workers.data.loading.loader_workers``). The first epoch starts the
  workers and is untimed; the next ``--epochs`` are timed whole (an epoch's start, when the queue refills,
  is part of what a trial waits for).
- **model**: the trial's training step (``workers.train.train_step``: AdamW, schedule, clipping; bf16
  autocast on CUDA) of a ViT-Ti (depth 12, 3 heads, width 192, MLP 768, patch 16) at ``--img-size`` on a
  fixed batch already on the device, after ``--warmup`` untimed steps.

The ratio loader ÷ model says whether the loader keeps up (>= 1) or the trial waits for data (< 1; its row's
``data_wait_fraction`` then approaches 1 - ratio). Also printed: one worker's rate, and how many workers
would feed the model (model rate ÷ the in-process rate, rounded up). On a GPU the model rate is tens of
times higher than on CPU, so run it on the machine the sweep will use (``--device cuda``).

    .venv/bin/python bench/loader_throughput.py                       # CPU: ~2 min on a quiet 2-core machine
    .venv/bin/python bench/loader_throughput.py --device cuda --workers 0,7,15 --images 2048
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from workers.config import ModelSpec, TrainSpec
from workers.data.imagefolder import FolderBatches
from workers.data.loading import loader_workers
from workers.data.registry import data_spec
from workers.devices import resolve_device, synchronize
from workers.models import build_model
from workers.train import make_context, train_step


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="for the model step: cpu, cuda, auto")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the trial's CPUs (torch threads)")
    parser.add_argument("--workers", help="comma-separated loader worker counts (default: 0 and CPUs - 1)")
    parser.add_argument("--images", type=int, default=512, help="training images generated (10 classes)")
    parser.add_argument("--image-px", type=int, default=320, help="stored JPEG width (height 3/4 of it)")
    parser.add_argument("--img-size", type=int, default=224, help="the model's input size (crop)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2, help="timed loader epochs per worker count")
    parser.add_argument("--steps", type=int, default=3, help="timed model steps")
    parser.add_argument("--warmup", type=int, default=1, help="untimed model steps")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    return parser.parse_args(argv)


def write_class_folder(root: Path, images: int, width: int, classes: int = 10) -> None:
    """``images`` training JPEGs (and a tenth as many validation ones) in ``classes`` class folders."""
    rng = np.random.default_rng(0)
    height = width * 3 // 4
    grid_y, grid_x = np.mgrid[0:height, 0:width] / max(width, height)
    for split, count in (("train", images), ("val", max(images // 10, classes))):
        for index in range(count):
            folder = root / split / f"class_{index % classes:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            a, b, c = rng.uniform(-3, 3, 3)
            base = np.stack([np.sin(a * grid_x + b * grid_y + c + k) for k in range(3)], axis=-1)
            pixels = np.clip(127 + 90 * base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{index:05d}.jpg", quality=90)


def loader_rate(root: Path, workers: int, args: argparse.Namespace) -> float:
    """Training samples/s of FolderBatches with ``workers`` workers, over ``args.epochs`` timed epochs."""
    spec = data_spec(name="imagefolder", root=str(root), img_size=args.img_size, num_workers=workers)
    data = FolderBatches(spec, torch.device("cpu"), cpus=args.threads)
    generator = torch.Generator().manual_seed(0)
    for _ in data.train_batches(args.batch_size, generator):  # starts the workers; untimed
        pass
    samples, start = 0, time.perf_counter()
    for _ in range(args.epochs):
        for _, labels in data.train_batches(args.batch_size, generator):
            samples += len(labels)
    return samples / (time.perf_counter() - start)


def model_rate(args: argparse.Namespace, device: torch.device) -> float:
    """Training samples/s of the trial's step on a ViT-Ti at ``args.img_size`` (a fixed batch on device)."""
    spec = ModelSpec(depth=12, num_heads=3, embed_dim=192, mlp_dim=768, patch_size=16, img_size=args.img_size,
                     num_classes=10)  # fmt: skip
    torch.manual_seed(0)
    ctx = make_context(build_model(spec).to(device), TrainSpec(deterministic=False), device, total_steps=10**9)
    inputs = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=device)
    labels = torch.randint(0, 10, (args.batch_size,), device=device)
    for _ in range(args.warmup):
        train_step(ctx, inputs, labels)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        train_step(ctx, inputs, labels)
    synchronize(device)
    return args.steps * args.batch_size / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    counts = [int(part) for part in args.workers.split(",")] if args.workers else [0]
    if not args.workers and loader_workers(None, args.threads) > 0:
        counts.append(loader_workers(None, args.threads))  # what a trial with these CPUs gets by default
    print(
        f"{args.images} JPEGs {args.image_px}x{args.image_px * 3 // 4} -> {args.img_size} px, batch {args.batch_size}; "
        f"{args.threads} CPUs, model on {device}; torch {torch.__version__}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="loader_bench_") as folder:
        root = Path(folder)
        start = time.perf_counter()
        write_class_folder(root, args.images, args.image_px)
        print(f"class folder written in {time.perf_counter() - start:.1f} s", flush=True)
        step = model_rate(args, device)
        print(f"model step (ViT-Ti, {args.img_size} px): {step:8.1f} samples/s", flush=True)
        rates = {}
        for workers in counts:
            rates[workers] = loader_rate(root, workers, args)
            print(
                f"loader, {workers:2d} workers: {rates[workers]:8.1f} samples/s   loader / model = "
                f"{rates[workers] / step:6.2f}" + ("   (loader-bound)" if rates[workers] < step else ""),
                flush=True,
            )
    if 0 in rates:  # the in-process rate stands for one worker's
        print(f"one loading process: {rates[0]:.1f} samples/s; to feed this model: about "
              f"{math.ceil(step / rates[0])} workers")  # fmt: skip
    if args.json:
        figures = {"model_samples_per_s": step, "loader_samples_per_s": rates, "device": str(device)}
        args.json.write_text(json.dumps(figures | {"args": vars(args) | {"json": str(args.json)}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
