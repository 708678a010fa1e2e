"""The options of ``make gpu-check`` (``workers/gpu_check.py``), apart from the check itself so that the
``sweep`` command's parser can offer them without importing torch."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_options(parser: argparse.ArgumentParser) -> None:
    """The check's options (shared by ``python -m workers.gpu_check`` and ``sweep gpu-check``)."""
    parser.add_argument("--device", default="auto", help="auto (cuda if visible, else the CPU mode), cuda, cuda:N, cpu")
    parser.add_argument("--batch-size", type=int, help="training batch (CUDA: 128, CPU: 16)")
    parser.add_argument("--infer-batch-size", type=int, help="inference batch (CUDA: 256, CPU: 32)")
    parser.add_argument("--steps", type=int, help="timed training steps (CUDA: 30, CPU: 5)")
    parser.add_argument("--warmup", type=int, help="untimed training steps before them (CUDA: 5, CPU: 1)")
    parser.add_argument("--infer-steps", type=int, help="timed inference passes (CUDA: 20, CPU: 3)")
    parser.add_argument("--latency-iters", type=int, help="timed batch-1 passes (CUDA: 50, CPU: 5)")
    parser.add_argument("--kappa-samples", type=int, help="images κ is computed on (CUDA: 8, CPU: 4)")
    parser.add_argument("--peak-size", type=int, help="N of the N×N matmul peak (CUDA: 8192, CPU: 1024)")
    parser.add_argument("--peak-matmuls", type=int, help="matmuls per timed window (CUDA: 20, CPU: 2)")
    parser.add_argument("--peak-repeats", type=int, default=4, help="timed windows; the fastest counts")
    parser.add_argument("--compile", action="store_true", help="train.compile: torch.compile the training step")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
