"""sweep/space/counts.py: stored parameter and FLOP counts are the measured ones, are read only for the fields and
the installation (library versions, counting sources) they were measured under, and survive concurrent writers."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sweep.space import counts, shapes
from sweep.space.loader import load_space

ROOT = Path(__file__).resolve().parents[3]
TINY = shapes.freeze(
    {"family": "vit", "depth": 1, "num_heads": 2, "head_dim": 8, "embed_dim": 16, "mlp_dim": 32, "img_size": 8,
     "in_chans": 1, "num_classes": 10, "patch_size": 4}
)  # fmt: skip


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An empty cache folder for this test, and the in-process memo of counts emptied before and after."""
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(counts.COUNT_CACHE_ENV, raising=False)
    shapes._measure.cache_clear()
    shapes._count_params.cache_clear()
    yield tmp_path
    shapes._measure.cache_clear()
    shapes._count_params.cache_clear()


def planned_counts(name: str, profile: str | None = None) -> list[tuple[str, int, int]]:
    from sweep.plan.plan import make_plan

    shapes._measure.cache_clear()
    shapes._count_params.cache_clear()
    shapes._surveys.clear()
    name, space, profile = load_space(name, profile)
    return [(c.config_id, c.params, c.flops_per_sample) for c in make_plan(name, space, profile).configs]


@pytest.mark.parametrize("space", ["local_digits", "mqar_recall", "vit_b_fixed_mlp"])
def test_a_plan_from_stored_counts_equals_a_plan_that_measures_every_model(space, own_cache, monkeypatch):
    monkeypatch.setenv(counts.COUNT_CACHE_ENV, "0")
    measured = planned_counts(space)
    assert not list(own_cache.rglob("*.json"))  # switched off: nothing written
    monkeypatch.delenv(counts.COUNT_CACHE_ENV)
    assert planned_counts(space) == measured  # measures and stores
    assert list(own_cache.rglob("*.json"))

    def no_building(*args, **kwargs):
        raise AssertionError("a stored count was measured again")

    monkeypatch.setattr(counts, "measure_on_meta", no_building)
    assert planned_counts(space) == measured  # every count read back


def test_a_count_is_read_only_for_its_own_fields_and_a_whole_file(own_cache):
    stored = counts.measure(TINY)
    assert stored == counts.measure_on_meta(TINY) and stored.flops > 0
    assert counts.read(TINY) == stored
    other = shapes.freeze({**dict(TINY), "mlp_dim": 48})
    assert counts.read(other) is None
    path = counts.entry_path(TINY)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "fields": counts.fields_json(other)}))  # another model's file
    assert counts.read(TINY) is None
    path.write_text(json.dumps(record)[:20])  # torn
    assert counts.read(TINY) is None
    assert counts.measure(TINY) == stored and counts.read(TINY) == stored  # measured again and rewritten


def test_parameters_alone_are_stored_without_flops_and_flops_complete_them(own_cache):
    params_only = counts.measure(TINY, flops=False)
    assert params_only.flops is None and counts.read(TINY) == params_only
    full = counts.measure(TINY)
    assert full.params == params_only.params and full.flops is not None and counts.read(TINY) == full


def test_another_library_version_or_counting_source_reads_none_of_the_counts(own_cache, monkeypatch):
    counts.measure(TINY)
    before = counts.folder()
    counts.counts_identity.cache_clear()
    monkeypatch.setattr(counts, "library_version", lambda name: "0.0-upgraded" if name == "timm" else None)
    try:
        assert counts.folder() != before and counts.read(TINY) is None
        counts.counts_identity.cache_clear()
        monkeypatch.undo()
        monkeypatch.setenv("SWEEP_CACHE_DIR", str(own_cache))
        assert counts.folder() == before and counts.read(TINY) is not None
    finally:
        counts.counts_identity.cache_clear()


def test_an_edited_family_module_changes_the_sources_digest(tmp_path):
    for name in ("families/vit.py", "models.py", "config.py", "conditioning.py", "batch.py", "probes/params.py",
                 "probes/flops.py"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n")
    before = counts.sources_digest(tmp_path)
    (tmp_path / "trial.py").write_text("# not a counting source\n")
    assert counts.sources_digest(tmp_path) == before
    (tmp_path / "families" / "vit.py").write_text("# vit, edited\n")
    assert counts.sources_digest(tmp_path) != before


def test_concurrent_writers_and_readers_see_whole_files_only(own_cache):
    stored = counts.measure_on_meta(TINY)
    seen, errors = [], []

    def write():
        for _ in range(40):
            counts.write(TINY, stored)

    def read():
        for _ in range(200):
            try:
                seen.append(counts.read(TINY))
            except Exception as exc:  # any error is a failure of the cache
                errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)] + [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and set(seen) <= {None, stored}
    assert counts.read(TINY) == stored
    assert [p.name for p in counts.folder().iterdir()] == [counts.entry_path(TINY).name]  # no temporary left


VALIDATE_LOADS = """
import json, runpy, sys
sys.argv = ["sweep", *sys.argv[1:]]
try:
    runpy.run_module("sweep.cli", run_name="__main__")
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "heavy": sorted(m for m in sys.modules
                  if m.split(".")[0] in ("torch", "torchvision", "timm", "transformers", "ray", "duckdb", "pyarrow"))}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("command", "space"), [("validate", "local_digits"), ("validate", "mqar_recall"),
                                                ("plan", "vit_b_fixed_mlp")])  # fmt: skip
def test_validate_and_a_plan_of_stored_counts_load_no_model_library(command, space, tmp_path):
    """`sweep validate` of a shipped space, and `sweep plan` once its counts are stored, import no torch, timm,
    transformers nor Ray (seconds of start-up each); validate reads no results, so it loads neither DuckDB nor
    pyarrow either (plan still imports sweep.analysis.sql, and with it both)."""
    env = {"SWEEP_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-c", VALIDATE_LOADS, command, space]
    first = subprocess.run(run, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert json.loads(first.stdout.strip().splitlines()[-1])["code"] in (0, None), first.stderr[-2000:]
    again = subprocess.run(run, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    found = json.loads(again.stdout.strip().splitlines()[-1])
    allowed = {"duckdb", "pyarrow"} if command == "plan" else set()
    heavy = {m.split(".")[0] for m in found["heavy"]} - allowed
    assert heavy == set() and found["code"] in (0, None), (found, again.stderr[-2000:])
