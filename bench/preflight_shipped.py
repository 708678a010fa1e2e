"""`sweep preflight` on every shipped space × profile, the way a user runs it, with the time each took.

Each space's profiles, and its base when the file names no ``default_profile`` (``sweep preflight davit_b``
checks that base: ImageNet at paper scale), through the CLI in a subprocess:

    sweep preflight SPACE --profile P --stand-in-data --results <temp> [--node-gpus 8 --node-cpus 96]

``--stand-in-data``: data that is not on this machine (ImageNet, the Hub's TinyStories, CIFAR and GLUE with no
network) is reported and each config runs on random batches of its shapes. Profiles that ask for GPUs are
checked against a stated node (``--node-gpus`` / ``--node-cpus``, default a common 8-GPU node), since this
machine has none. Prints one line per run and the total; exits 1 if any run found a problem.

    .venv/bin/python bench/preflight_shipped.py                       # every space × profile (~15 min on 2 cores)
    .venv/bin/python bench/preflight_shipped.py --spaces gpt2_tinystories,lra_listops
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sweep.space.loader import load_space, shipped_spaces

SWEEP = str(Path(sys.executable).with_name("sweep"))


def space_profiles(name: str) -> list[str | None]:
    """The profiles of space ``name``, and None (its base) first when it names no default profile."""
    _, space, chosen = load_space(name)
    return ([] if chosen else [None]) + list(space.profiles)


def needs_gpus(name: str, profile: str | None) -> bool:
    _, space, _ = load_space(name, profile)
    return space.resources.gpus_per_trial > 0


def preflight_command(name: str, profile: str | None, results: Path, node: tuple[float, float] | None) -> list[str]:
    command = [SWEEP, "preflight", name, "--stand-in-data", "--results", str(results)]
    command += ["--profile", profile] if profile else []
    command += ["--node-gpus", f"{node[0]:g}", "--node-cpus", f"{node[1]:g}"] if node else []
    return command


def run_one(name: str, profile: str | None, results: Path, node: tuple[float, float]) -> tuple[int, float, str]:
    """(exit code, wall seconds, the run's last stderr line) of one preflight."""
    stated = node if needs_gpus(name, profile) else None
    started = time.perf_counter()
    done = subprocess.run(preflight_command(name, profile, results, stated), capture_output=True, text=True)
    wall_s = time.perf_counter() - started
    lines = [line for line in done.stderr.splitlines() if line.startswith("[preflight]")] or done.stderr.splitlines()
    if done.returncode != 0:  # the table's failing rows say what
        lines += [line for line in done.stdout.splitlines() if line and not line.rstrip().endswith(" ok")][1:]
    return done.returncode, wall_s, "\n    ".join(lines[-1:] if done.returncode == 0 else lines[-6:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", help="comma-separated space names (default: every shipped space)")
    parser.add_argument("--node-gpus", type=float, default=8, help="GPUs of the node GPU profiles are checked on")
    parser.add_argument("--node-cpus", type=float, default=96, help="CPUs of that node")
    args = parser.parse_args()
    names = args.spaces.split(",") if args.spaces else sorted(shipped_spaces())
    failed, total_s, runs = [], 0.0, 0
    with tempfile.TemporaryDirectory() as results:
        for name in names:
            for profile in space_profiles(name):
                code, wall_s, last = run_one(name, profile, Path(results), (args.node_gpus, args.node_cpus))
                total_s, runs = total_s + wall_s, runs + 1
                label = f"{name} --profile {profile}" if profile else f"{name} (base)"
                print(f"{'ok  ' if code == 0 else 'FAIL'} {wall_s:6.1f}s  {label}: {last}", flush=True)
                if code != 0:
                    failed.append(label)
    listed = f": {', '.join(failed)}" if failed else ""
    print(f"{runs} preflights in {total_s / 60:.1f} min; {len(failed)} failed{listed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
