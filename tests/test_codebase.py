"""The codebase's shape: the layering a newcomer relies on, checked rather than hoped for."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (a lazy import still makes a cycle)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: str) -> dict[str, set[str]]:
    """The package's modules (subpackages included) and the ones of them each imports."""
    modules = {module_name(path): path for path in (ROOT / package).rglob("*.py")}
    return {name: {m for m in imported_modules(path) if m in modules and m != name} for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None (depth-first search)."""
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return [*trail[trail.index(target) :], target] if target in trail else [node, target]
            if target not in state and (cycle := visit(target, [*trail, target])):
                return cycle
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("package", ["sweep", "workers"])
def test_no_import_cycle(package):
    assert find_cycle(import_graph(package)) is None


# The floors of sweep/, bottom to top, in the order a sweep takes them: a module may import its own floor and
# those below it, never one above. Beneath every stage, the ground: modules all stages share (errors, words,
# metrics as printed, Markdown, the CLI's choices). The questions are declarations every stage reads, so they
# sit on the first floor and import no stage; the run needs the results' sink and the analysis (which configs
# need more seeds), and nothing imports the command line.
GROUND = ("sweep.errors", "sweep.text", "sweep.headline", "sweep.markdown", "sweep.choices")
FLOORS = ("questions", "space", "plan", "results", "analysis", "run", "cli")


def floor_of(module: str) -> int | None:
    """The floor of a module of ``sweep`` (-1: the ground), or None for one outside it (or the facade)."""
    if module in GROUND:
        return -1
    parts = module.split(".")
    if parts[0] != "sweep" or len(parts) < 2 or parts[1] not in FLOORS:
        return None
    return FLOORS.index(parts[1])


def upward_imports(imports: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import that runs up a floor, or from the ground into a floor."""
    found = []
    for importer, imported in sorted(imports.items()):
        here = floor_of(importer)
        for module in sorted(imported):
            there = floor_of(module)
            if here is not None and there is not None and there > here:
                found.append(f"{importer} -> {module}")
    return found


def test_the_floor_check_finds_a_planted_upward_import():
    planted = {
        "sweep.results.compact": {"sweep.analysis.sql", "sweep.plan.plan"},
        "sweep.space.model": {"sweep.cli.parsers"},
        "sweep.text": {"sweep.questions"},
        "sweep.run.tuner": {"sweep.results.sink", "sweep.errors"},
    }
    assert upward_imports(planted) == [
        "sweep.results.compact -> sweep.analysis.sql",
        "sweep.space.model -> sweep.cli.parsers",
        "sweep.text -> sweep.questions",
    ]


def test_every_folder_of_the_driver_is_on_a_floor():
    folders = {path.name for path in (ROOT / "sweep").iterdir() if path.is_dir() and path.name != "__pycache__"}
    loose = {path.stem for path in (ROOT / "sweep").glob("*.py")} - {"__init__", "__main__"}
    assert folders == set(FLOORS)
    assert {f"sweep.{name}" for name in loose} == set(GROUND)


def test_the_driver_imports_only_down_its_floors():
    """No two folders of ``sweep/`` import each other and none imports ``cli/``: every import, at the top, lazy
    inside a function, or for type checking only, goes to its own floor or one below (``FLOORS``)."""
    assert upward_imports(import_graph("sweep")) == []


def test_workers_never_import_the_driver():
    """Trials must run where only ``workers`` is installed: the dependency points one way."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "sweep")
        for path in (ROOT / "workers").rglob("*.py")
    }
    assert {path: mods for path, mods in offenders.items() if mods} == {}


@pytest.mark.slow
def test_the_facade_loads_lazily_and_names_real_functions():
    code = (
        "import sys, sweep; assert 'ray' not in sys.modules and 'torch' not in sys.modules, 'eager import';"
        "from sweep import load_space, make_plan, run_query, SweepError;"
        "name, space, profile = load_space('local_digits'); print(len(make_plan(name, space, profile).configs))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0


ANALYSIS_RUN = """
import json, sys
from sweep.cli import main
results, out = sys.argv[1], sys.argv[2]
codes = []
for argv in (["--help"], ["sql", "SELECT count(*) FROM depth_edge", "--results", results],
             ["doctor", "--results", results], ["compact", "--results", results],
             ["report", "plant", "--results", results, "--out", out]):
    try:
        codes.append(main(argv))
    except SystemExit as exit:
        codes.append(exit.code)
from sweep import open_results
rows = len(open_results(results).vs_baseline.fetchall())
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "torchvision", "timm", "transformers", "ray"))
print(json.dumps({"codes": codes, "rows": rows, "heavy": heavy}))
"""


@pytest.mark.slow
def test_the_analysis_commands_and_open_results_load_no_model_library_nor_ray(tmp_path):
    """`sweep --help`, `sql`, `doctor`, `compact`, `report` and `open_results` read results only: none may load
    torch (seconds of start-up for every query) or Ray."""
    import json

    from sweep.results.importer import import_file
    from tests.helpers import PLANTED_MEANS, planted_rows, write_csv

    results = tmp_path / "results"
    import_file(write_csv(tmp_path / "plant.csv", planted_rows("plant", PLANTED_MEANS, noise=0.05)), results)
    done = subprocess.run([sys.executable, "-c", ANALYSIS_RUN, str(results), str(tmp_path / "report")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["codes"] == [0, 0, 0, 0, 0] and found["rows"] == len(PLANTED_MEANS)
    assert found["heavy"] == []


def test_config_imports_no_data_module():
    """The model, recipe and probe settings sit below the data sets: each data set's module builds on them."""
    assert not {m for m in imported_modules(ROOT / "workers" / "config.py") if m.startswith("workers.data")}


def string_comparisons(path: Path) -> set[str]:
    """String constants that ``path`` compares with ``==``/``!=``/``in`` or matches in a dict or tuple of them."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                elements = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found.update(e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str))
        elif isinstance(node, ast.Dict):
            found.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return found


def test_no_code_outside_a_data_sets_module_branches_on_its_name():
    """Adding a data set is its module and a registry line: nothing in sweep/ or the rest of workers/ may
    decide by a data set's name (``if data.name == "mqar"``, a table keyed by names)."""
    from workers.data.registry import DATA_SET_NAMES

    # sweep/plan/identity.py names the ListOps options field `listops` of the flat layout config ids were hashed from
    outside = [
        p
        for p in (*(ROOT / "sweep").rglob("*.py"), *(ROOT / "workers").rglob("*.py"))
        if "data" not in p.parts and p != ROOT / "sweep" / "plan" / "identity.py"
    ]
    offenders = {str(p.relative_to(ROOT)): sorted(string_comparisons(p) & set(DATA_SET_NAMES)) for p in outside}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_no_code_outside_the_families_branches_on_a_family_name():
    """Adding a model family is its module and a registry line: nothing in sweep/ or the rest of workers/ may
    decide by a family's name (``if spec.family == "gpt2"``, a table keyed by names); what differs between
    families is a field of ``Family`` (workers/families/base.py)."""
    from workers.models import FAMILIES

    outside = [
        p for p in (*(ROOT / "sweep").rglob("*.py"), *(ROOT / "workers").rglob("*.py")) if "families" not in p.parts
    ]
    offenders = {str(p.relative_to(ROOT)): sorted(string_comparisons(p) & set(FAMILIES)) for p in outside}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_registry_lists_every_data_set_module_and_only_those():
    from workers.data.base import DataSetSpec
    from workers.data.registry import DATA_SETS

    def subclasses(cls):
        return {cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))}

    named = {cls for cls in subclasses(DataSetSpec) if "name" in cls.model_fields}  # a concrete data set
    assert named == set(DATA_SETS)
    assert all(cls.__module__.startswith("workers.data.") for cls in DATA_SETS)


def test_no_file_holds_a_merge_conflicts_markers():
    """A conflict resolved by hand can leave ``<<<<<<<`` … ``>>>>>>>`` behind in a doc, where no parser
    notices (one did, in docs/analysis.md): no tracked text file may hold a marker line."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    markers = ("<" * 7 + " ", ">" * 7 + " ")
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".sql", ".yaml", ".yml", ".toml", ".txt", ".sh", ""} or not path.is_file():
            continue
        lines = path.read_text(errors="replace").splitlines()
        found += [f"{name}:{i}" for i, line in enumerate(lines, 1) if line.startswith(markers)]
    assert not found, f"merge conflict markers left in {found}"


# Tests that are about the whole project rather than one module: they stay at the top of tests/.
PROJECT_TESTS = {"test_codebase.py", "test_documented_commands.py", "test_packaging.py"}


def mirrored_modules(test: Path, root: Path = ROOT) -> list[Path]:
    """What a test file's path says it tests: ``tests/sweep/run/test_tuner_faults.py`` → ``sweep/run/tuner.py``
    (or a folder ``sweep/run/tuner/``, or an SQL file ``tuner.sql``), trying every ``_``-prefix of the name
    after ``test_``; a name that is the folder's own (``tests/sweep/cli/test_cli_messages.py``) tests the
    package ``sweep/cli/``."""
    folder = root / test.parent.relative_to(root / "tests")
    words = test.stem.removeprefix("test_").split("_")
    stems = ["_".join(words[:n]) for n in range(len(words), 0, -1)]
    found = [p for s in stems for p in (folder / f"{s}.py", folder / s, folder / f"{s}.sql") if p.exists()]
    return found or ([folder] if folder.name in stems and folder.is_dir() else [])


def test_the_tests_mirror_the_code():
    """A module's tests are found by its path: every test file under tests/ sits in the folder that mirrors
    its module's and is named after it (``sweep/run/tuner.py`` → ``tests/sweep/run/test_tuner*.py``)."""
    tests_dir = ROOT / "tests"
    misplaced = [
        str(test.relative_to(ROOT))
        for test in tests_dir.rglob("test_*.py")
        if not (test.parent == tests_dir and test.name in PROJECT_TESTS) and not mirrored_modules(test)
    ]
    assert misplaced == [], "name each after the module it tests, in the mirrored folder"
    assert mirrored_modules(tests_dir / "sweep" / "run" / "test_tuner_faults.py") == [
        ROOT / "sweep" / "run" / "tuner.py"
    ]
    assert not mirrored_modules(tests_dir / "sweep" / "run" / "test_nothing_here.py")


# The other way round: every module with behaviour has a test file of its own at the mirrored path. "Behaviour":
# the module defines a function at its top level, or a class with a method of its own (a module of constants,
# dataclasses without methods, or re-exports has none; a package's lazy ``__getattr__``/``__dir__`` is a
# re-export face, not behaviour). "Its own": a test file whose path names it first, the longest name matching
# (``tests/workers/test_trial_batch.py`` is workers/trial_batch.py's, not workers/trial.py's); a package's
# ``__init__.py`` is named by its folder (``tests/sweep/cli/test_cli_messages.py``,
# ``tests/sweep/analysis/test_views.py``).
LAZY_FACE = {"__getattr__", "__dir__"}
# Modules with behaviour that need no test file of their own, each with why. Keep this short.
UNTESTED_BY_DESIGN = {}
# Modules with behaviour that had no test file of their own on 2026-12-05 (when this check was written). The
# list only shrinks: a module gets its test file and leaves the list (the check fails while a mirrored module is
# still listed), and no module may join it (its length may not grow past NOT_YET_MIRRORED_AT_MOST). A new module
# comes with its test file.
NOT_YET_MIRRORED: set[str] = {
    "sweep/analysis/report/data.py",
    "sweep/analysis/sql.py",
    "sweep/cli/estimates.py",
    "sweep/cli/parsers.py",
    "sweep/cli/plan.py",
    "sweep/cli/results.py",
    "sweep/plan/plan.py",
    "sweep/plan/theory.py",
    "sweep/questions/base.py",
    "sweep/results/data_export.py",
    "sweep/results/doctor.py",
    "sweep/results/reader.py",
    "sweep/results/schema.py",
    "sweep/space/shapes.py",
    "sweep/space/validation.py",
}
NOT_YET_MIRRORED_AT_MOST = 15


def has_behaviour(path: Path) -> bool:
    """Whether a module defines a top-level function (a package's lazy re-export hooks aside) or a class with a
    method of its own."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name not in LAZY_FACE:
            return True
        if isinstance(node, ast.ClassDef) and any(
            isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body
        ):
            return True
    return False


def modules_with_behaviour(root: Path = ROOT) -> list[Path]:
    return sorted(
        path
        for package in ("sweep", "workers")
        for path in (root / package).rglob("*.py")
        if "__pycache__" not in path.parts and has_behaviour(path)
    )


def own_test_files(root: Path = ROOT) -> set[Path]:
    """The modules (a package as its ``__init__.py``) that some test file names first."""
    owned = set()
    for test in (root / "tests").rglob("test_*.py"):
        named = mirrored_modules(test, root)
        if named:
            owned.add(named[0] / "__init__.py" if named[0].is_dir() else named[0])
    return owned


def modules_without_tests(root: Path = ROOT) -> list[str]:
    owned = own_test_files(root)
    return [str(path.relative_to(root)) for path in modules_with_behaviour(root) if path not in owned]


def test_the_mirror_check_finds_a_planted_module_without_tests(tmp_path):
    """A planted tree: a module with a function and no test is found; one with its test, a constants module, a
    lazy re-export face and a package tested by its folder's name are not."""
    files = {
        "sweep/__init__.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
        "sweep/run/__init__.py": "",
        "sweep/run/untested.py": "def step():\n    return 1\n",
        "sweep/run/tested.py": "class Step:\n    def __call__(self):\n        return 1\n",
        "sweep/run/constants.py": "LIMIT = 3\nclass Plain:\n    x: int = 1\n",
        "workers/cli/__init__.py": "def main():\n    return 0\n",
        "tests/sweep/run/test_tested_faults.py": "",
        "tests/workers/cli/test_cli_messages.py": "",
        "tests/sweep/run/test_gone.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert modules_without_tests(tmp_path) == ["sweep/run/untested.py"]
    assert not mirrored_modules(tmp_path / "tests/sweep/run/test_gone.py", tmp_path)
    (tmp_path / "tests/sweep/run/test_untested.py").write_text("")
    assert modules_without_tests(tmp_path) == []


def test_every_module_with_behaviour_has_its_own_test_file():
    """The mirror's other way (test_the_tests_mirror_the_code is the first): a module's behaviour is tested in
    the test file its path names, so a reader finds it there and a module without tests stands out."""
    missing = set(modules_without_tests()) - set(UNTESTED_BY_DESIGN)
    assert sorted(missing - NOT_YET_MIRRORED) == [], "give each a test file at the mirrored path"
    assert sorted(NOT_YET_MIRRORED - missing) == [], "these have their test file now: take them off NOT_YET_MIRRORED"
    assert len(NOT_YET_MIRRORED) <= NOT_YET_MIRRORED_AT_MOST, "NOT_YET_MIRRORED only shrinks: test the new module"
    exempt = {str(path.relative_to(ROOT)) for path in modules_with_behaviour()}
    assert set(UNTESTED_BY_DESIGN) <= exempt, "an exemption names a module that no longer exists or has no behaviour"


def test_the_family_registry_names_every_family_module_and_each_by_its_own_name():
    """workers/families/__init__.py's table (modules imported on first use): every Family a module defines is in
    it, under the name the Family gives itself."""
    import importlib

    from workers.families import FAMILIES, FAMILY_MODULES
    from workers.families.base import Family

    defined = set()
    for path in sorted((ROOT / "workers" / "families").glob("*.py")):
        module = importlib.import_module(f"workers.families.{path.stem}")
        defined |= {(path.stem, name) for name, value in vars(module).items() if isinstance(value, Family)}
    assert defined == set(FAMILY_MODULES.values())
    assert all(FAMILIES[name].name == name for name in FAMILIES)
