"""The options of `make gpu-check` (workers/gpu_check_options.py), shared by its two parsers."""

import argparse
from pathlib import Path

from workers.gpu_check_options import add_options


def test_the_options_parse_with_their_defaults_and_types():
    parser = argparse.ArgumentParser()
    add_options(parser)
    defaults = parser.parse_args([])
    assert (defaults.device, defaults.peak_repeats, defaults.compile, defaults.steps) == ("auto", 4, False, None)
    args = parser.parse_args(["--device", "cuda:1", "--steps", "7", "--compile", "--json", "out.json"])
    assert (args.device, args.steps, args.compile, args.json) == ("cuda:1", 7, True, Path("out.json"))


def test_the_sweep_command_and_the_module_offer_the_same_options():
    from sweep.cli.parsers import build_parser

    parser = argparse.ArgumentParser()
    add_options(parser)
    ours = {a.dest for a in parser._actions} - {"help"}
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["gpu-check"]
    assert ours <= {a.dest for a in sub._actions}
