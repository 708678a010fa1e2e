"""Every cheap command the docs show runs as printed from the project folder in the README's set-up (.venv
activated: its bin first on PATH), a query over results a sweep wrote there; every `sweep sql` command a report
prints runs as printed from any folder (it carries --results). tests/sweep/analysis/test_hints.py runs the commands a
run and its report print, reruns included."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.analysis.report import write_report
from sweep.results.importer import import_file
from tests.helpers import PLANTED_MEANS, planted_rows, write_csv

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHEAP = ("spaces", "plan", "validate", "kappa-theory", "sql")  # read-only, seconds each
PLACEHOLDER = re.compile(
    r"SPACE\b|NAME\b|QUERY|FILE\b|DIR\b|…|\.\.\.|\[|\||<|\bN\b|\bX\b|\bS\b|\bP\b|HEAD|bucket|CONFIG"
)
NEEDS_ARGUMENTS = ("sql", "validate", "kappa-theory")  # `sweep sql` alone is the command's name in a sentence


def activated_env() -> dict:
    """The environment after `source .venv/bin/activate`: the interpreter's bin first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "VIRTUAL_ENV": str(Path(bin_dir).parent),
    }


def documented_commands() -> list[str]:
    """`sweep CMD …` in the pages' code spans and code blocks (one line each), for the cheap commands, without
    placeholders a reader must fill in."""
    found = []
    for page in PAGES:
        text = page.read_text()
        spans = re.findall(r"`(sweep [^`\n]+)`", text)
        blocks = [line.split("  #")[0].strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                  for line in block.splitlines() if line.strip().startswith("sweep ")]  # fmt: skip
        for command in [*spans, *blocks]:
            words = command.split()
            named_only = len(words) == 2 and words[1] in NEEDS_ARGUMENTS
            if len(words) > 1 and words[1] in CHEAP and not named_only and not PLACEHOLDER.search(command):
                try:
                    shlex.split(command)
                except ValueError:  # a query continued on the next line of a block
                    continue
                found.append(command)
    return sorted(set(found))


COMMANDS = documented_commands()


def test_the_docs_show_cheap_commands_of_each_kind():
    assert {c.split()[1] for c in COMMANDS} >= {"spaces", "plan", "sql"}
    assert len(COMMANDS) >= 6


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_a_documented_command_runs_as_printed(command, tmp_path):
    # A command that writes a file (`sweep sql --print-views > views.sql`) writes it in a folder of its own; a
    # query runs in a folder whose results/ a sweep wrote (over none, `sweep sql` says so and exits 2)
    cwd = tmp_path if ">" in command or command.startswith("sweep sql") else ROOT
    if command.startswith("sweep sql"):
        import_file(write_csv(tmp_path / "plant.csv", planted_rows("plant", PLANTED_MEANS, noise=0.05)),
                    tmp_path / "results")  # fmt: skip
    done = subprocess.run(command, shell=True, cwd=cwd, env=activated_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_commands_a_report_prints_run_as_printed(tmp_path):
    rows = planted_rows("plant", PLANTED_MEANS, noise=0.05)
    import_file(write_csv(tmp_path / "plant.csv", rows), tmp_path / "results")
    text = write_report("plant", tmp_path / "results", tmp_path / "reports" / "plant").read_text()
    printed = sorted(set(re.findall(r"`(sweep sql [^`]+)`", text)))
    assert printed, "the report prints no query"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in printed:  # from a folder that holds no results/: the command says where they are
        assert f"--results {tmp_path / 'results'}" in command or "--print-views" in command, command
        done = subprocess.run(command, shell=True, cwd=elsewhere, env=activated_env(), capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0 and "(0 rows)" not in done.stdout, f"{command}\n{done.stderr[-2000:]}"
