"""What the trial benchmarks share: the model/trial command-line options and the trial config they build."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_trial_options(parser: argparse.ArgumentParser) -> None:
    """Device, threads, the small digits ViT's shape, seed, and output options."""
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:N")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (the same for every side)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--embed-dim", type=int, default=64)
    parser.add_argument("--mlp-dim", type=int, default=128)
    parser.add_argument("--patch-size", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this path")
    parser.add_argument("--verbose", action="store_true", help="the trial's per-epoch log lines")


def trial_config(args: argparse.Namespace, **train: object) -> dict:
    """A trial config like tests/conftest.py's tiny_vit_config at the benchmark's model size, with the
    default probes (κ every epoch), so the real trial path is measured. ``train`` adds recipe fields."""
    return {
        "model": {
            "family": "vit",
            "depth": args.depth,
            "num_heads": args.num_heads,
            "embed_dim": args.embed_dim,
            "mlp_dim": args.mlp_dim,
            "patch_size": args.patch_size,
        },
        "data": {"name": "digits"},
        "train": {"epochs": args.epochs, "batch_size": args.batch_size, **train},
        "probes": {},
        "seed": args.seed,
        "device": args.device,
        "threads": args.threads,
    }
