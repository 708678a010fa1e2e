"""``sweep rerun --dry-run`` writes nothing (issue 38): no lock file, no folder, no file touched, so it works on a
read-only results folder, on one that does not exist yet, and beside a sweep of the space that holds its lock."""

import os
import stat
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.results.storage import sweep_lock


def tree(root: Path) -> dict[str, tuple]:
    """Every folder and file under ``root`` with its mode, size and modification time."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files, ""]:
            path = Path(folder) / name
            info = path.stat()
            found[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def make_read_only(root: Path) -> None:
    for folder, folders, files in os.walk(root):
        for name in [*files, *folders, ""]:
            path = Path(folder) / name
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def writable_again(root: Path) -> None:
    for folder, _, _ in os.walk(root):
        Path(folder).chmod(Path(folder).stat().st_mode | stat.S_IWUSR)


DRY_RUNS = {
    "all": (["--seeds", "3", "--select", "all"], "a run would start them (--dry-run: nothing runs)"),
    "inconclusive": (["--select", "inconclusive", "--budget", "4"], "selection 'inconclusive', 3 open verdicts"),
}


@pytest.mark.parametrize("selection", sorted(DRY_RUNS))
def test_a_dry_run_on_a_read_only_results_folder_writes_nothing(planted_adaptive, capsys, selection):
    _, results, _ = planted_adaptive
    options, said = DRY_RUNS[selection]
    make_read_only(results)  # (root ignores the modes; the tree below is compared whoever runs the test)
    before = tree(results)
    try:
        assert main(["rerun", "adaptive", *options, "--dry-run", "--results", str(results)]) == 0
    finally:
        after = tree(results)
        writable_again(results)
    err = capsys.readouterr().err
    assert said in err, err
    assert after == before
    assert not (results / ".locks").exists()


def test_a_dry_run_beside_a_sweep_that_holds_the_lock_answers_and_leaves_it(planted_adaptive, capsys):
    _, results, _ = planted_adaptive
    with sweep_lock(results, "adaptive", wait=False):  # another sweep of the space is writing
        before = tree(results)
        assert main(["rerun", "adaptive", "--seeds", "3", "--dry-run", "--results", str(results)]) == 0
        assert tree(results) == before
    assert "(--dry-run: nothing runs)" in capsys.readouterr().err


def test_a_dry_run_into_a_folder_not_made_yet_makes_none(planted_adaptive, tmp_path, capsys):
    nowhere = tmp_path / "not-yet" / "results"
    assert main(["rerun", "adaptive", "--seeds", "2", "--dry-run", "--results", str(nowhere)]) == 0
    assert "12 of 12 (config, seed) pairs missing; a run would start them" in capsys.readouterr().err
    assert not (tmp_path / "not-yet").exists()
