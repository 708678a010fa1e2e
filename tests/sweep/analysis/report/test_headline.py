"""The report's headline metric (sweep/analysis/report/headline.py), found from planted results."""

from sweep.analysis.report.headline import find_headline
from sweep.analysis.sql import connect
from sweep.headline import Headline
from sweep.results.sink import record_space


def test_planted_top1_rows_give_top1_at_the_default_tolerance(planted):
    assert find_headline(connect(planted), "plant") == Headline(name="top1", mode="max", tolerance=0.5)


def test_the_tolerance_the_latest_sweep_recorded_is_the_one_used(planted):
    record_space(planted, "plant", "later", None, "q", "top1", "max", 2.0)
    assert find_headline(connect(planted), "plant") == Headline(name="top1", mode="max", tolerance=2.0)
