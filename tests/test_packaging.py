"""The project as a package: a wheel carries the shipped spaces and the analysis views, so `sweep plan` and
`sweep sql` work from any folder with no checkout in sight; the editable install finds them too; a user's
own `search_spaces/` (or `$SWEEP_SPACES_DIR` in its place) joins the shipped spaces; the lock agrees with pyproject;
the code needs no Python newer than the floor pyproject states."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.results.importer import import_file
from sweep.space.loader import shipped_spaces
from sweep.space.model import SPACES_DIR_ENV
from tests.helpers import planted_rows, write_csv

REPO = Path(__file__).resolve().parent.parent
# What a wheel is built from: the packages and the project's metadata (copied, so no build/ lands in the repo).
SOURCES = ["pyproject.toml", "README.md", "sweep", "workers", "search_spaces"]
SHIPPED_COUNT = len(list((REPO / "search_spaces").glob("*.yaml")))

# Run in the interpreter under test: the plan of a shipped space, an analysis view over a results folder,
# and where the package found its data (printed last, as JSON).
PROBE = """
import json, sys
from sweep.cli import main
import sweep.space.loader, sweep.analysis.sql, sweep.analysis.views
plan_rc = main(["plan", "local_digits", "--format", "json"])
sql_rc = main(["sql", "FROM depth_edge ORDER BY num_heads", "--results", sys.argv[1], "--format", "json"])
spaces = {k: str(v) for k, v in sweep.space.loader.shipped_spaces().items()}
found = {"plan_rc": plan_rc, "sql_rc": sql_rc, "sweep": sweep.space.loader.__file__,
         "spaces": spaces, "views": str(sweep.analysis.views.VIEWS_DIR)}
print("@@" + json.dumps(found))
"""


def planted_results(folder: Path) -> Path:
    """Three seeds of depth 4, 2 and 1 at 4 heads, baseline 4 × 4: depth 2 is 0.1 points down (holds at
    the 0.5 default tolerance), depth 1 ten points down (breaks); so depth_edge reads (2, 1)."""
    rows = planted_rows("pkg", {(4, 4): 90.0, (2, 4): 89.9, (1, 4): 80.0}, noise=0.05)
    results = folder / "results"
    assert import_file(write_csv(folder / "pkg.csv", rows), results) == {"pkg": 9}
    return results


def run_probe(python: list[str], cwd: Path, results: Path, env: dict) -> tuple[dict, str]:
    done = subprocess.run([*python, "-c", PROBE, str(results)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    head, _, tail = done.stdout.rpartition("@@")
    return json.loads(tail), head


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", SPACES_DIR_ENV)}
    return {**env, **extra}


@pytest.fixture(scope="module")
def wheel_target(tmp_path_factory) -> Path:
    """The project built as a wheel (from a copy of its sources) and installed, without dependencies, into
    a folder of its own."""
    root = tmp_path_factory.mktemp("wheel")
    source, wheels, target = root / "source", root / "wheels", root / "target"
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(origin, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(source)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    (wheel,) = wheels.glob("heads_for_depth-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return target


@pytest.mark.slow
def test_wheel_plans_and_queries_from_another_folder(wheel_target, tmp_path):
    results = planted_results(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # no search_spaces/ and no checkout here
    elsewhere.mkdir()
    found, printed = run_probe([sys.executable], elsewhere, results, clean_env(PYTHONPATH=str(wheel_target)))
    # the code, the spaces and the views all come from the installed wheel, none from the checkout
    assert Path(found["sweep"]).is_relative_to(wheel_target)
    assert Path(found["views"]).is_relative_to(wheel_target) and (Path(found["views"]) / "core.sql").is_file()
    assert len(found["spaces"]) == SHIPPED_COUNT
    assert all(Path(path).is_relative_to(wheel_target) for path in found["spaces"].values())
    assert found["plan_rc"] == 0 and found["sql_rc"] == 0
    plan, end = json.JSONDecoder().raw_decode(printed)
    edges = json.loads(printed[end:])
    # local_digits.yaml's axes: depth 1, 2, 4 × 1, 4, 16, 64 heads
    assert plan["space"] == "local_digits"
    assert {(t["depth"], t["num_heads"]) for t in plan["trials"]} == {(d, h) for d in (1, 2, 4) for h in (1, 4, 16, 64)}
    assert [(e["num_heads"], e["holds_down_to_depth"], e["breaks_at_depth"]) for e in edges] == [(4, 2, 1)]


def test_editable_install_finds_the_shipped_data_from_another_folder(tmp_path):
    """The development install (``pip install -e``) maps ``search_spaces`` and ``sweep`` to the checkout, so
    the lookups :mod:`sweep.space.model` and :mod:`sweep.analysis.sql` make work from any folder. (Asked of the
    import system directly: importing the CLI costs seconds, and the wheel test above already runs it.)"""
    code = (
        "import importlib.resources, importlib.util; "
        "print(importlib.resources.files('search_spaces')); print(importlib.util.find_spec('sweep').origin)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    spaces, sweep_init = (Path(line) for line in done.stdout.split())
    assert spaces == REPO / "search_spaces" and (spaces / "local_digits.yaml").is_file()
    views = REPO / "sweep" / "analysis" / "views"
    assert (Path(sweep_init).parent / "analysis" / "views" / "core.sql") == views / "core.sql"
    assert (views / "core.sql").is_file() and (REPO / "sweep" / "questions" / "budget.sql").is_file()


def test_own_spaces_in_the_working_folder_join_and_shadow_the_shipped(tmp_path, monkeypatch):
    monkeypatch.delenv(SPACES_DIR_ENV, raising=False)
    own = tmp_path / "search_spaces"
    own.mkdir()
    shipped_text = (REPO / "search_spaces" / "local_digits.yaml").read_text()
    (own / "mine.yaml").write_text(shipped_text)
    (own / "local_digits.yaml").write_text(shipped_text)
    monkeypatch.chdir(tmp_path)
    spaces = shipped_spaces()
    assert spaces["mine"] == own / "mine.yaml"
    assert spaces["local_digits"] == own / "local_digits.yaml"  # the user's copy wins
    assert spaces["vit_b_fixed_mlp"] == REPO / "search_spaces" / "vit_b_fixed_mlp.yaml"
    assert len(spaces) == SHIPPED_COUNT + 1


def test_spaces_dir_variable_joins_the_shipped_spaces_in_place_of_the_working_folder(tmp_path, monkeypatch):
    folder, own = tmp_path / "team_spaces", tmp_path / "search_spaces"
    folder.mkdir()
    own.mkdir()
    (folder / "ours.yaml").write_text((REPO / "search_spaces" / "local_digits.yaml").read_text())
    (own / "working.yaml").write_text((REPO / "search_spaces" / "local_digits.yaml").read_text())
    monkeypatch.setenv(SPACES_DIR_ENV, str(folder))
    monkeypatch.chdir(tmp_path)
    spaces = shipped_spaces()
    assert spaces["ours"] == folder / "ours.yaml" and "working" not in spaces
    assert spaces["vit_b_fixed_mlp"] == REPO / "search_spaces" / "vit_b_fixed_mlp.yaml"
    assert len(spaces) == SHIPPED_COUNT + 1


def pins(text: str) -> dict[str, str]:
    """``name==version`` lines as {normalised name: version}."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)", line)
        if match:
            found[re.sub(r"[-_.]+", "-", match.group(1).lower())] = match.group(2)
    return found


def test_lock_pins_every_dependency_of_pyproject():
    """Each requirement named in pyproject.toml (runtime and dev) has a pin in requirements.lock, and the
    lock pins the torch that works here, not the CPU-only wheel that breaks torchvision."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    named = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    names = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", req).group(0).lower()) for req in named}
    locked = pins((REPO / "requirements.lock").read_text())
    assert names - set(locked) == set()
    assert "+cpu" not in locked["torch"]


# --- the Python floor ---------------------------------------------------------------------------------------

PYTHON_FLOOR = "3.11"  # what pyproject's requires-python and ruff's target-version must both say
CODE = ["sweep", "workers", "bench", "tests"]


def vermin_violations(*paths: str | Path, floor: str = PYTHON_FLOOR) -> tuple[int, str]:
    """vermin (a static minimum-version checker) over ``paths``: its exit status and the violations it lists
    (nothing when the code runs on ``floor``). Pessimistic: a file this interpreter cannot even parse (syntax
    newer than it, such as PEP 695's ``class Box[T]:`` on 3.11) is a violation, not "no evidence"."""
    vermin = Path(sys.executable).parent / "vermin"
    assert vermin.exists(), "vermin is not installed: it is a dev dependency (make install)"
    done = subprocess.run(
        [str(vermin), "--quiet", "--violations", f"--target={floor}-", "--pessimistic", "--no-tips",
         "--no-config-file", "--processes=1", *map(str, paths)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.returncode, (done.stdout + done.stderr).strip()


def test_the_code_needs_no_python_newer_than_the_floor():
    code, violations = vermin_violations(*CODE)
    assert (code, violations) == (0, ""), f"newer than Python {PYTHON_FLOOR}:\n{violations}"


# Each of these needs a Python newer than the floor it is checked against (what vermin says, as a pattern). The
# last is why the floor is 3.11: the code used StrEnum while pyproject still said 3.10.
NEWER = [
    ("import itertools\n\nprint(list(itertools.batched(range(4), 2)))\n", PYTHON_FLOOR,
     r"'itertools\.batched' member requires !2, 3\.12"),
    ("type Pair = tuple[int, int]\n", PYTHON_FLOOR, r"type alias statement `type Pair.*` requires !2, 3\.12"),
    # Python 3.11 cannot parse it (a syntax error: pessimistic); 3.12 knows it as a generic class
    ("class Box[T]:\n    item: T\n", PYTHON_FLOOR, r"invalid syntax: class Box\[T\]|generic class .* 3\.12"),
    ("from enum import StrEnum\n", "3.10", r"'enum\.StrEnum' member requires !2, 3\.11"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "floor", "needs"), NEWER)
def test_the_floor_check_fails_on_newer_code(tmp_path, source, floor, needs):
    """The check above can fail: a newer module member, statement or syntax is listed, by file."""
    (tmp_path / "newer.py").write_text(source)
    _, violations = vermin_violations(tmp_path, floor=floor)
    assert re.search(needs, violations) and "newer.py" in violations, violations


def test_requires_python_ruff_and_the_check_agree_on_the_floor():
    """pyproject's requires-python, ruff's target-version and the floor checked above are the same version."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    major, minor = PYTHON_FLOOR.split(".")
    assert pyproject["project"]["requires-python"] == f">={PYTHON_FLOOR}"
    assert pyproject["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert sys.version_info >= (int(major), int(minor))  # and the tests run on it
