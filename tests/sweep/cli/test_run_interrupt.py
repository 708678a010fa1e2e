"""Ctrl-C during ``sweep run`` (issue 38): exit 130, one line that says how many trials were recorded and that the
same command continues, nothing of Ray's (its ``Tuner.restore`` advice is wrong for this tool); the same command
then runs exactly what is missing, no pair twice."""

import os
import re
import signal
import subprocess
import textwrap
import time

import pytest

from sweep.analysis.sql import run_query
from sweep.cli import main
from tests.helpers import SWEEP, TINY_SPACE_BODY

# Two configs × two seeds, one at a time, of several epochs each: long enough to be stopped with some recorded
SPACE = "question: does Ctrl-C stop cleanly?\n" + TINY_SPACE_BODY.replace("seeds: [0]", "seeds: [0, 1]").replace(
    "epochs: 1, max_steps: 1", "epochs: 3, max_steps: 6"
)
INTERRUPTED = re.compile(r"^interrupted: (\d+) trials? recorded; run the same command to continue$")


def pairs(results) -> list[tuple]:
    return run_query(results, "SELECT config_id, seed FROM trials WHERE space = 'stopped'")[1]


@pytest.mark.slow
@pytest.mark.serial
def test_ctrl_c_exits_130_with_one_line_and_the_same_command_continues(tmp_path, local_ray, capfd):
    path = tmp_path / "stopped.yaml"
    path.write_text(textwrap.dedent(SPACE))
    results = tmp_path / "results"
    command = [SWEEP, "run", str(path), "--results", str(results)]
    driver = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 180
    while not list(results.glob("trials/stopped/*/*.parquet")) and time.monotonic() < deadline:
        assert driver.poll() is None, driver.communicate()
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, err
    lines = [line.strip("\r ") for line in err.replace("\r", "\n").splitlines() if line.strip("\r ")]
    said = [line for line in lines if INTERRUPTED.match(line)]
    assert len(said) == 1 and lines[-1] == said[0], err
    assert not any(word in err for word in ("Tuner.restore", "Resume experiment", "Ray Tune", "Traceback")), err
    recorded = pairs(results)
    assert int(INTERRUPTED.match(said[0]).group(1)) == len(recorded) >= 1
    assert len(recorded) < 4, "the sweep ended before the interrupt: nothing was tested"

    # the same command again, through the CLI's entry point in this process on the local Ray of the fixture (a
    # process of its own would start Python, torch and Ray anew: about 10-15 s of two cores)
    code = main([*command[1:], "--quiet"])
    again = capfd.readouterr().err
    assert code == 0, again
    assert f"resuming: {len(recorded)} of 4 trials already recorded" in again, again
    after = pairs(results)
    assert len(after) == len(set(after)) == 4, after
    assert set(recorded) <= set(after)
