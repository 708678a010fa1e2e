"""Hardening: bad input is rejected whole with one line a person can act on (never a traceback), damaged
results files are named and set aside, and checkpoints hold only tensors and plain data.

The property-based tests throw malformed files at the entry points (`sweep import`, `sweep validate`,
`trial`) through their `main` functions: every file is imported or rejected with exit 2 and its reasons,
the results folder byte-for-byte unchanged on rejection, and nothing escapes as an exception.
"""

import contextlib
import csv
import io
import json
import math
import os
import pickle
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.space.loader import load_space
from tests.helpers import write_csv

ROOT = Path(__file__).resolve().parents[3]
FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A valid trials row as CSV text, every cell a string: the fuzzers start here and break it.
GOOD = {
    "space": "fuzz", "config_id": "42", "seed": "0", "is_baseline": "true", "depth": "2", "num_heads": "4",
    "embed_dim": "64", "mlp_dim": "128", "status": "ok", "params": "1000", "top1": "90.5", "git_sha": "0123456789",
    "trial_id": "7", "started_at": "2025-01-31T12:00:00+00:00", "wall_s": "1.5",
}  # fmt: skip
EXTRA = ["top5", "val_loss", "metric", "metric_mode", "score", "profile", "head_dim", "attn_dim", "restarts",
         "finished_at", "sweep_id", "family", "bleu", ""]  # fmt: skip
BAD_CELLS = st.sampled_from([
    "", "nan", "NaN", "-1", "-3.5", "2.5", "0", "inf", "-inf", "1e400", "99999999999999999999", "abc", "True",
    "FALSE", "é", "\u2028", "0x10", " 4 ", "None", "null", '"', "1,2", "../x", "local_digits", "2025-13-45",
    "val_loss", "max", "pruned",
]) | st.text(max_size=6)  # fmt: skip


def call(argv: list[str]) -> tuple[int, str, str]:
    """Run the ``sweep`` CLI in this process: its exit status, stdout and stderr (no exception may escape)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    if not folder.exists():
        return {}
    return {str(path.relative_to(folder)): (None if path.is_dir() else path.read_bytes()) for path in folder.rglob("*")}


@pytest.fixture(scope="module")
def base_results(tmp_path_factory) -> Path:
    """A results folder with one imported row already, so imports also meet existing results."""
    folder = tmp_path_factory.mktemp("base")
    rows = [{**GOOD, "seed": "9", "config_id": "base"}]
    code, _, err = call(["import", str(write_csv(folder / "base.csv", rows)), "--results", str(folder / "results")])
    assert code == 0, err
    return folder / "results"


def assert_imported_or_rejected(file: Path, base: Path) -> None:
    """Import ``file`` into a copy of ``base``: exit 0 and the rows are there, or exit 2 with the file named
    and the folder byte-for-byte as before; never a traceback."""
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results"
        shutil.copytree(base, results)
        before = snapshot(results)
        count_before = run_query(results, "SELECT count(*) FROM trials")[1][0][0]
        code, out, err = call(["import", str(file), "--results", str(results)])
        assert "Traceback" not in err and "Traceback" not in out
        assert code in (0, 2), (code, err)
        event("imported" if code == 0 else "rejected")
        if code == 2:
            assert err.startswith(f"error: {file}"), err
            assert snapshot(results) == before, "a rejected import changed the results folder"
        else:
            after = snapshot(results)
            assert all(after.get(name) == content for name, content in before.items()), "an import changed a file"
            assert run_query(results, "SELECT count(*) FROM trials")[1][0][0] > count_before


# --- import: what used to break ------------------------------------------------------------------------


def test_all_digit_ids_and_shas_stay_text(tmp_path):
    results = tmp_path / "results"
    row = {**GOOD, "sweep_id": "20250131", "config_id": "0042", "trial_id": "123"}
    code, _, err = call(["import", str(write_csv(tmp_path / "digits.csv", [row])), "--results", str(results)])
    assert code == 0, err
    stored = run_query(results, "SELECT git_sha, config_id, trial_id, sweep_id FROM trials")[1]
    assert stored == [("0123456789", "0042", "123", "20250131")]
    # Parquet with the sha as a number column (what pyarrow infers from a CSV of digits)
    table = pa.table({k: [v] for k, v in {**GOOD, "seed": 1}.items() if k != "git_sha"} | {"git_sha": [1234567]})
    pq.write_table(table, tmp_path / "numbers.parquet")
    code, _, err = call(["import", str(tmp_path / "numbers.parquet"), "--results", str(results)])
    assert code == 0, err
    assert ("1234567",) in run_query(results, "SELECT git_sha FROM trials")[1]


def test_cells_of_the_wrong_type_are_row_reasons(tmp_path):
    rows = [{**GOOD, "seed": "0", "wall_s": "fast"}, {**GOOD, "seed": "1", "is_baseline": "maybe", "restarts": "-1"}]
    rows[0]["restarts"] = "2.5"
    code, _, err = call(["import", str(write_csv(tmp_path / "types.csv", rows)), "--results", str(tmp_path / "r")])
    assert code == 2 and not (tmp_path / "r").exists()
    assert "row 1: wall_s: must be a number (got 'fast')" in err
    assert "row 1: restarts: must be a whole number (got '2.5')" in err
    assert "row 2: is_baseline: must be true or false (got 'maybe')" in err
    assert "row 2: restarts: must not be negative (got -1)" in err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "the file is empty"),
        ("space,seed\nfuzz,0\n".encode("utf-16"), "UTF-16"),
        ("space,seed,depth\nf\xe9,0,1\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 on line 2"),
        (b"space,seed\n", "no rows"),
        (b"space,seed,space\nx,0,y\n", "column 'space' appears twice"),
        (b"space\tseed\nx\t0\n", "tab-separated"),
        (b"space,seed,depth\nx,0\n", "row 1: has 2 cells, but the header has 3 columns"),
    ],
)
def test_unreadable_csv_is_one_line_that_says_why(tmp_path, content, says):
    (tmp_path / "bad.csv").write_bytes(content)
    code, _, err = call(["import", str(tmp_path / "bad.csv"), "--results", str(tmp_path / "r")])
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()


def test_a_space_name_cannot_leave_the_results_folder(tmp_path):
    row = {**GOOD, "space": "../../outside"}
    code, _, err = call(["import", str(write_csv(tmp_path / "up.csv", [row])), "--results", str(tmp_path / "r")])
    assert code == 2 and "row 1: space: must be a name of letters" in err
    assert not (tmp_path / "outside").exists()


def shipped_rows(space: str, metric_column: str) -> tuple[list[dict], tuple]:
    """Rows for a shipped space without is_baseline: each planned shape once (seed 0)."""
    name, loaded, profile = load_space(space)
    plan = make_plan(name, loaded, profile)
    rows = []
    for config in plan.configs:
        s = config.shape
        rows.append({"space": space, "seed": 0, "depth": s.depth, "num_heads": s.num_heads, "head_dim": s.head_dim,
                     "embed_dim": s.embed_dim, "mlp_dim": s.mlp_dim, "status": "ok", "params": config.params,
                     metric_column: 50.0})  # fmt: skip
    b = plan.baseline.shape
    return rows, (b.depth, b.num_heads, b.head_dim)


@pytest.mark.parametrize(("space", "column"), [("local_digits", "top1"), ("mqar_recall", "accuracy")])
def test_rows_of_a_shipped_space_get_its_baseline_marked(tmp_path, space, column):
    rows, baseline = shipped_rows(space, column)
    results = tmp_path / "results"
    code, _, err = call(["import", str(write_csv(tmp_path / "rows.csv", rows)), "--results", str(results)])
    assert code == 0 and "warning" not in err, err
    marked = run_query(results, "SELECT depth, num_heads, head_dim, family FROM trials WHERE is_baseline")[1]
    _, loaded, _ = load_space(space)
    assert marked == [(*baseline, loaded.model.family)]
    assert run_query(results, "SELECT count(*) FROM vs_baseline WHERE verdict IS NOT NULL")[1][0][0] == len(rows)


def test_a_folder_that_cannot_take_the_files_keeps_none_of_them(base_results, tmp_path, monkeypatch):
    import sweep.results.importer

    results = tmp_path / "results"
    shutil.copytree(base_results, results)
    before = snapshot(results)
    calls, real_write = [], sweep.results.importer.write_atomic

    def full_disk(table, path):  # the disk fills up at the second space's epochs file
        calls.append(path)
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        real_write(table, path)

    monkeypatch.setattr(sweep.results.importer, "write_atomic", full_disk)
    rows = [{**GOOD, "space": space, "seed": "3"} for space in ("fuzz", "other")]
    code, _, err = call(["import", str(write_csv(tmp_path / "two.csv", rows)), "--results", str(results)])
    assert code == 1 and "No space left on device; nothing was imported" in err
    assert snapshot(results) == before


def test_no_baseline_row_is_a_warning_naming_the_column(tmp_path):
    rows = [{k: v for k, v in GOOD.items() if k != "is_baseline"}]
    code, out, err = call(["import", str(write_csv(tmp_path / "nob.csv", rows)), "--results", str(tmp_path / "r")])
    assert code == 0 and "imported 1 trial rows" in out
    assert "warning: no row of space 'fuzz' is marked as its baseline" in err and "is_baseline" in err
    assert len(err.strip().splitlines()) == 1


# --- import: property-based ----------------------------------------------------------------------------


def sometimes(draw, one_in: int) -> bool:
    return draw(st.sampled_from([True] + [False] * (one_in - 1)))


@st.composite
def csv_files(draw) -> bytes:
    """The bytes of a CSV file: trials rows with broken cells, columns and lines, in some encoding, or not
    (about one in five is a file the importer takes)."""
    kind = draw(st.sampled_from(["rows"] * 5 + ["garbage", "empty", "header"]))
    if kind == "garbage":
        return draw(st.binary(max_size=300))
    if kind == "empty":
        return draw(st.sampled_from([b"", b"\n", b"  \r\n", b"\xef\xbb\xbf"]))
    dropped = draw(st.sets(st.sampled_from(list(GOOD)), min_size=1, max_size=3)) if sometimes(draw, 4) else set()
    columns = [c for c in GOOD if c not in dropped]
    if sometimes(draw, 3):
        columns += draw(st.lists(st.sampled_from(EXTRA), min_size=1, max_size=3, unique=True))
    rows = []
    for index in range(draw(st.integers(1, 5))):
        row = {c: GOOD.get(c, "") for c in columns} | ({"seed": str(index)} if "seed" in columns else {})
        if sometimes(draw, 3):
            for column in draw(st.sets(st.sampled_from(columns), min_size=1, max_size=3)):
                row[column] = draw(BAD_CELLS)
        rows.append([row[c] for c in columns])
    if sometimes(draw, 5):
        rows.append(list(rows[0]))  # a duplicate
    if kind == "header":
        rows = []
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows(rows)
    lines = buffer.getvalue().splitlines(keepends=True)
    if len(lines) > 1 and sometimes(draw, 5):  # ragged: cut a cell off, or add one
        at = draw(st.integers(1, len(lines) - 1))
        lines[at] = lines[at].rstrip("\r\n").rsplit(",", 1)[0] + "\r\n" if draw(st.booleans()) else ",x" + lines[at]
    text = "".join(lines)
    encoding = draw(st.sampled_from(["utf-8"] * 4 + ["utf-8-sig", "latin-1", "utf-16", "utf-16-le", "cp1252"]))
    data = text.encode(encoding, errors="replace")
    if sometimes(draw, 6):  # cut short anywhere
        data = data[: draw(st.integers(0, len(data)))]
    return data


@pytest.mark.slow
@FUZZ
@given(content=csv_files())
def test_fuzzed_csv_is_imported_or_rejected_whole(base_results, tmp_path_factory, content):
    folder = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    (folder / "fuzz.csv").write_bytes(content)
    assert_imported_or_rejected(folder / "fuzz.csv", base_results)


PARQUET_VALUES = {
    "int": st.integers(-(2**63), 2**63 - 1),
    "small": st.integers(-3, 300),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "text": st.text(max_size=8),
    "good": st.sampled_from(["fuzz", "ok", "0123", "64", "true", "2025-01-31T12:00:00"]),
    "bool": st.booleans(),
    "none": st.none(),
    "list": st.lists(st.integers(0, 9), max_size=3),
    "time": st.datetimes(timezones=st.just(UTC)),
}


@st.composite
def parquet_files(draw, folder: Path) -> Path:
    """A Parquet file of trials rows whose columns may have other types (numbers for ids, lists, times,
    NaN, huge or negative numbers), missing or repeated columns, no rows; or garbage, or cut short."""
    path = folder / "fuzz.parquet"
    kind = draw(st.sampled_from(["table"] * 5 + ["garbage", "empty", "cut"]))
    if kind in ("garbage", "empty"):
        path.write_bytes(b"" if kind == "empty" else draw(st.binary(max_size=300)))
        return path
    size = draw(st.integers(0, 4))
    dropped = draw(st.sets(st.sampled_from(list(GOOD)), min_size=1, max_size=3)) if sometimes(draw, 4) else set()
    names = [c for c in GOOD if c not in dropped]
    if sometimes(draw, 3):
        names += draw(st.lists(st.sampled_from([*EXTRA, "space"]), min_size=1, max_size=2))  # may repeat one
    retyped = draw(st.sets(st.sampled_from(names), min_size=1, max_size=3)) if sometimes(draw, 2) else set()
    arrays = []
    for name in names:
        if name in retyped:
            values = draw(st.lists(draw(st.sampled_from(list(PARQUET_VALUES.values()))), min_size=size, max_size=size))
        else:
            text = GOOD.get(name, "")
            values = [text if name != "seed" else str(i) for i in range(size)]
            as_int = name in ("seed", "depth", "num_heads", "embed_dim", "mlp_dim", "params", "git_sha")
            values = [int(v) for v in values] if as_int else values
        arrays.append(pa.array(values))
    pq.write_table(pa.Table.from_arrays(arrays, names=names), path)
    if kind == "cut":
        data = path.read_bytes()
        path.write_bytes(data[: draw(st.integers(0, len(data) - 1))])
    return path


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_fuzzed_parquet_is_imported_or_rejected_whole(base_results, tmp_path_factory, data):
    folder = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    path = data.draw(parquet_files(folder))
    assert_imported_or_rejected(path, base_results)


# --- the space loader and the trial config loader --------------------------------------------------------

SPACE = {
    "question": "fuzz?",
    "model": {"family": "vit", "embed_dim": 16, "mlp_dim": 32, "patch_size": 2},
    "axes": {"depth": [1, 2], "num_heads": [1, 4]},
    "baseline": {"depth": 2, "num_heads": 4},
    "data": {"name": "digits"},
    "train": {"epochs": 1, "batch_size": 16},
    "metric": {"name": "top1", "tolerance": 1.0},
}
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def leaf_paths(tree, prefix=()):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from leaf_paths(value, (*prefix, key))
    yield prefix


@st.composite
def space_texts(draw) -> str:
    """A space's YAML: the valid one with values replaced by ill-typed ones, or plain garbage text."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.text(max_size=200))
    space = json.loads(json.dumps(SPACE))
    for path in draw(st.lists(st.sampled_from(list(leaf_paths(SPACE))), min_size=1, max_size=3)):
        if not path:
            return yaml.safe_dump(draw(YAML_VALUES))
        parent = space
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent[path[-1]] = draw(YAML_VALUES)
    if draw(st.booleans()):
        space[draw(st.sampled_from(["profiles", "search", "constraints", "nonsense"]))] = draw(YAML_VALUES)
    return yaml.safe_dump(space, allow_unicode=True)


@FUZZ
@given(text=space_texts())
def test_fuzzed_space_file_is_valid_or_one_error(tmp_path_factory, text):
    path = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())) / "space.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = call(["validate", str(path)])
    assert "Traceback" not in err
    event(f"exit {code}")
    assert (code == 0 and "valid" in out) or (code == 2 and err.startswith("error: ")), (code, err)


def test_space_file_that_is_not_utf8_is_one_error(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_bytes("question: caf\xe9\n".encode("latin-1"))
    code, _, err = call(["validate", str(path)])
    assert code == 2 and "UTF-8" in err


def trial(argv: list[str]) -> tuple[int, str]:
    from workers.trial import main as trial_main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = trial_main(argv)
    return code, err.getvalue()


JSON_SCALARS = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=6)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(config=JSON_VALUES | st.fixed_dictionaries({"model": st.one_of(JSON_SCALARS, st.lists(JSON_VALUES))}))
def test_fuzzed_trial_config_is_an_error_record_not_a_traceback(tmp_path_factory, config):
    """Well-formed JSON of the wrong shape: the trial records an error (exit 1), it does not crash."""
    path = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())) / "trial.json"
    path.write_text(json.dumps(config))
    code, err = trial([str(path), "--quiet"])
    assert code == 1 and "Traceback" not in err


@pytest.mark.parametrize("content", [b'{"model":', b"\xff\xfe garbage", b"model: [unclosed"])
def test_trial_config_that_is_not_json_is_one_error(tmp_path, content):
    path = tmp_path / ("trial.yaml" if content.startswith(b"model") else "trial.json")
    path.write_bytes(content)
    code, err = trial([str(path), "--quiet"])
    assert code == 2 and "Traceback" not in err and err.startswith("error: the trial config")


# --- damaged results ---------------------------------------------------------------------------------


THROUGHPUT = {"train_samples_per_s": "100.0", "infer_samples_per_s": "300.0"}  # the report plots them (log scale)


def two_imports(tmp_path) -> tuple[Path, Path]:
    """A results folder written by the importer, two files of trials; returns it and the second file."""
    results = tmp_path / "results"
    for seed in (0, 1):
        rows = [{**GOOD, "seed": str(seed), "config_id": f"c{depth}", "depth": str(depth), **THROUGHPUT}
                for depth in (1, 2)]  # fmt: skip
        code, _, err = call(["import", str(write_csv(tmp_path / f"part{seed}.csv", rows)), "--results", str(results)])
        assert code == 0, err
    second = next((results / "trials" / "fuzz").glob("*/part1.parquet"))
    return results, second


def test_a_truncated_trials_file_is_named_and_the_rest_still_answers(tmp_path):
    results, damaged = two_imports(tmp_path)
    damaged.write_bytes(damaged.read_bytes()[:100])
    code, out, err = call(["sql", "SELECT count(*) AS n FROM trials", "--results", str(results), "--format", "json"])
    assert code == 0 and json.loads(out) == [{"n": 2}]
    assert str(damaged) in err and "sweep doctor --fix" in err and len(err.strip().splitlines()) == 1

    code, out, _ = call(["doctor", "--results", str(results)])
    assert code == 1 and f"problem: {damaged}: cannot be read as Parquet" in out
    assert damaged.exists()
    code, out, _ = call(["doctor", "--results", str(results), "--fix"])
    assert code == 0 and f"moved {damaged} -> " in out
    assert not damaged.exists()
    assert [p.name for p in (results / ".quarantine").rglob("*.parquet")] == ["part1.parquet"]
    moved = next((results / ".quarantine").rglob("part1.parquet"))
    assert moved.relative_to(results / ".quarantine").parts[1:] == damaged.relative_to(results).parts
    code, out, _ = call(["doctor", "--results", str(results)])
    assert code == 0 and out.strip().endswith("no problems")
    code, _, err = call(["sql", "SELECT count(*) FROM trials", "--results", str(results)])
    assert code == 0 and err == ""


def test_damaged_files_are_left_out_by_name_whatever_the_folder_is_called(tmp_path):
    folder = tmp_path / "it's results"
    folder.mkdir()
    results, damaged = two_imports(folder)
    damaged.write_bytes(b"not parquet at all")
    code, out, err = call(["sql", "SELECT count(*) AS n FROM trials", "--results", str(results), "--format", "json"])
    assert code == 0 and json.loads(out) == [{"n": 2}] and str(damaged) in err


@pytest.mark.slow
def test_report_goes_on_over_the_rest_naming_the_damaged_file(tmp_path):
    results, _ = two_imports(tmp_path)
    garbage = results / "epochs" / "fuzz" / "x" / "junk.parquet"
    garbage.parent.mkdir(parents=True)
    garbage.write_bytes(os.urandom(64))
    code, _, err = call(["report", "fuzz", "--results", str(results), "--out", str(tmp_path / "report")])
    assert code == 0 and str(garbage) in err and "Traceback" not in err
    assert (tmp_path / "report" / "index.md").exists()


def test_doctor_finds_wrong_types_unknown_versions_temporaries_and_repeats(tmp_path):
    results, second = two_imports(tmp_path)
    folder = second.parent
    wrong = pq.read_table(second).set_column(6, "seed", pa.array(["zero", "one"]))
    assert wrong.column_names[6] == "seed"
    pq.write_table(wrong, folder / "wrong_type.parquet")
    future = pq.read_table(second)
    future = future.set_column(0, "schema_version", pa.array([7, 7], pa.int32()))
    pq.write_table(future, folder / "future.parquet")
    old_tmp, new_tmp = folder / ".a.parquet.1234.tmp", folder / ".b.parquet.5678.tmp"
    old_tmp.write_bytes(b"half")
    new_tmp.write_bytes(b"half")
    os.utime(old_tmp, (time.time() - 3600, time.time() - 3600))
    copy = results / "trials" / "fuzz" / "another-sweep" / "part1.parquet"  # the same ok rows, another sweep
    copy.parent.mkdir()
    shutil.copy(second, copy)

    code, out, _ = call(["doctor", "--results", str(results)])
    lines = out.strip().splitlines()
    assert code == 1
    assert any(f"problem: {folder / 'wrong_type.parquet'}: column seed is string" in line for line in lines)
    assert any(f"problem: {folder / 'future.parquet'}: schema_version 7 is not one" in line for line in lines)
    assert any(f"problem: {old_tmp}: a temporary file" in line for line in lines)
    assert any(line.startswith(f"note: {new_tmp}: a temporary file") for line in lines)
    assert any(line.startswith("note: space 'fuzz', config c1, seed 1: 2 ok rows") for line in lines)
    assert lines[-1].startswith("doctor: checked") and "3 problems" in lines[-1]

    code, out, _ = call(["doctor", "--results", str(results), "--fix"])
    assert code == 0 and sum(line.startswith("moved ") for line in out.splitlines()) == 3 and new_tmp.exists()
    code, out, _ = call(["doctor", "--results", str(results)])
    assert code == 0 and "note: space 'fuzz'" in out


def test_doctor_of_a_missing_folder_is_bad_input(tmp_path):
    code, _, err = call(["doctor", "--results", str(tmp_path / "nowhere")])
    assert code == 2 and err.startswith("error: no results folder at")


# --- checkpoints -------------------------------------------------------------------------------------


@dataclass
class Counters:
    epoch: int
    loss: float


def test_plain_turns_a_state_into_what_weights_only_loads(tmp_path):
    from sweep.run.tuner import CHECKPOINT_FILE, load_checkpoint, plain, save_checkpoint

    state = {
        "version": torch.__version__,  # a str subclass
        "numbers": [np.float32(1.5), np.int64(3), np.bool_(True)],
        "array": np.arange(3),
        "when": datetime(2025, 1, 31, tzinfo=UTC),
        "loop": Counters(2, 0.5),
        "path": tmp_path,
        "betas": (0.9, 0.999),
        "rng": torch.get_rng_state(),
        3: {"nested": [None, "x"]},
    }
    save_checkpoint(state, tmp_path)
    loaded = load_checkpoint(tmp_path)
    assert loaded["version"] == str(torch.__version__) and type(loaded["version"]) is str
    assert loaded["numbers"] == [1.5, 3, True] and loaded["array"] == [0, 1, 2]
    assert loaded["when"] == "2025-01-31T00:00:00+00:00" and loaded["loop"] == {"epoch": 2, "loss": 0.5}
    assert loaded["path"] == str(tmp_path) and loaded["betas"] == (0.9, 0.999) and loaded[3] == {"nested": [None, "x"]}
    assert torch.equal(loaded["rng"], state["rng"])
    with pytest.raises(TypeError, match=r"state\['odd'\] is of type object; a checkpoint holds only tensors"):
        plain({"odd": object()})
    # A checkpoint holding an object is refused, not unpickled
    torch.save({"loop": Counters(1, 0.1)}, tmp_path / CHECKPOINT_FILE)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        load_checkpoint(tmp_path)


@pytest.mark.slow
def test_a_trial_resumes_from_a_weights_only_checkpoint(tiny_vit_config, tmp_path):
    from sweep.run.tuner import load_checkpoint, save_checkpoint
    from workers.trial import run_trial

    config = json.loads(json.dumps(tiny_vit_config))
    config["train"].update(epochs=2, batch_size=256, max_steps=8)  # epoch 1: 5 steps, epoch 2: the last 3
    config["probes"]["memory"] = False
    uninterrupted = run_trial(config)

    def crash_after_first_epoch(row, kappa, snapshot):
        save_checkpoint(snapshot(), tmp_path)
        raise SystemExit("worker lost")

    with pytest.raises(SystemExit):
        run_trial(config, on_epoch=crash_after_first_epoch)
    resumed = run_trial(config, resume_from=load_checkpoint(tmp_path))
    assert resumed["status"] == "ok" and resumed["epochs_run"] == 2
    assert [r["train_loss"] for r in resumed["epochs"]] == [r["train_loss"] for r in uninterrupted["epochs"]]
    assert resumed["top1"] == uninterrupted["top1"] and math.isclose(resumed["kappa_mean"], uninterrupted["kappa_mean"])


def test_nothing_loads_checkpoints_with_pickle():
    sources = [p for folder in ("sweep", "workers", "bench", "tests") for p in (ROOT / folder).rglob("*.py")]
    offenders = [str(p) for p in sources if "weights_only=False" in p.read_text() and p.name != "test_cli_hardening.py"]
    assert offenders == []
