"""Fixtures shared by the tests of the analysis: the views' and the report's."""

import pytest

from sweep.results.importer import import_file
from tests.helpers import PLANTED_MEANS, planted_rows, write_csv


@pytest.fixture
def planted(tmp_path):
    """The planted truth of PLANTED_MEANS (tests/helpers.py), imported: three seeds, 0.05 points apart."""
    results = tmp_path / "results"
    rows = planted_rows("plant", PLANTED_MEANS, noise=0.05)
    assert import_file(write_csv(tmp_path / "plant.csv", rows), results) == {"plant": 36}
    return results
