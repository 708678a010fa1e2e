"""Headline metrics as the driver words them (sweep/headline.py)."""

from sweep.headline import Headline, direction_words, format_delta, format_score, tolerance_unit, with_registry_defaults


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
    top1, loss = Headline(name="top1", mode="max", tolerance=0.5), Headline(name="val_loss", mode="min", tolerance=0.02)
    assert (top1.worse, loss.worse) == ("below", "above")
    assert (top1.unit, loss.unit) == ("points", "nats")
    assert Headline(name="bleu", mode="max", tolerance=1.0).label == "bleu"  # a metric it does not know keeps its name


def test_a_space_file_gets_the_registry_defaults_and_a_row_does_not():
    """One type for (metric, mode, tolerance): the space model fills what the file leaves out from the metric's
    registry entry; a headline built from a row (the importer) or the views (the report) keeps None."""
    from sweep.space.model import Space
    from workers.metrics import METRICS

    field = Space.model_fields["metric"]
    assert field.annotation is Headline and field.default == Headline(name="top1", mode="max", tolerance=0.5)
    stated = with_registry_defaults({"name": "val_loss"})
    assert stated == {"name": "val_loss", "mode": "min", "tolerance": METRICS["val_loss"].default_tolerance}
    top5 = with_registry_defaults({"name": "top5", "tolerance": 2.0})
    assert top5 == {"name": "top5", "mode": "max", "tolerance": 2.0}
    assert with_registry_defaults({"name": "bleu"}) == {"name": "bleu"}  # unknown: nothing to fill from
    assert Headline(name="top1").tolerance is None and Headline(name="top1").mode is None
