"""Headline metrics as the driver words them (sweep/metrics.py)."""

from sweep.metrics import Headline, direction_words, format_delta, format_score, tolerance_unit


def test_scores_and_differences_in_the_metrics_units():
    assert format_score(90.0, "top1") == "90.0%" and format_score(None, "top1") == "n/a"
    assert format_score(0.41234, "val_loss") == "0.412 nats"
    assert format_score(1.23456, "no_such_metric") == "1.235"  # unknown: three decimals, no unit
    assert format_delta(1.234, "top1") == "+1.2" and format_delta(-0.0341, "val_loss") == "-0.034"
    assert format_delta(None, "top1") == "n/a"


def test_tolerance_units_and_direction():
    assert tolerance_unit("top1") == "points" and tolerance_unit("val_loss") == "nats"
    assert tolerance_unit("no_such_metric") == "units"
    assert direction_words("max") == "higher is better" and direction_words("min") == "lower is better"


def test_a_headline_says_which_side_is_worse():
    top1, loss = Headline("top1", "max", 0.5), Headline("val_loss", "min", 0.02)
    assert (top1.worse, loss.worse) == ("below", "above")
    assert (top1.unit, loss.unit) == ("points", "nats")
    assert Headline("bleu", "max", 1.0).label == "bleu"  # a metric it does not know keeps its name
