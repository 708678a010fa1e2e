"""What every data set shares (``workers/data/base.py``): each states its number of outcomes once, and the
metric turns it into a chance score. The test over ``DATA_SETS`` at the end covers every data set, as the
test over ``FAMILIES`` covers every model family."""

from __future__ import annotations

import math

import pytest

from workers.data.cifar import CifarData
from workers.data.digits import DigitsData
from workers.data.imagefolder import ImageFolderData
from workers.data.index_lookup import IndexLookupData
from workers.data.listops import ListOpsData
from workers.data.lra_listops import LRAListOpsData
from workers.data.mlm_corpus import MLMCorpusData
from workers.data.mqar import MQARData
from workers.data.nearest_neighbor import NearestNeighborData
from workers.data.registry import DATA_SETS, data_spec
from workers.data.repeated_tokens import RepeatedTokensData
from workers.data.tinystories import TinyStoriesData
from workers.metrics import METRICS, MODALITY_METRICS

# One config of each data set, and the number of equally likely answers a model that learned nothing guesses
# among, stated here from what each data set is (its docstring), not read from its class.
EXAMPLES: dict[type, tuple[dict, float]] = {
    DigitsData: ({"name": "digits"}, 10),  # the ten digits
    CifarData: ({"name": "cifar100"}, 100),  # CIFAR-100's classes
    ImageFolderData: ({"name": "imagefolder", "num_classes": 37}, 37),  # the classes it is told to expect
    ListOpsData: ({"name": "listops", "seq_len": 64}, 10),  # the values 0-9
    LRAListOpsData: ({"name": "lra_listops", "seq_len": 64}, 10),
    MQARData: ({"name": "mqar", "seq_len": 64, "mqar": {"vocab_size": 64, "num_kv_pairs": 4}}, 4),  # k values
    TinyStoriesData: ({"name": "tinystories", "seq_len": 32, "text": {"vocab_size": 1000}}, 1000),  # tokens
    MLMCorpusData: ({"name": "mlm_corpus", "seq_len": 32, "corpus": {"vocab_size": 500}}, 500),
    RepeatedTokensData: (  # the mean period (3 + 6) / 2
        {"name": "repeated_tokens", "seq_len": 64, "repeated_tokens": {"min_period": 3, "max_period": 6}},
        4.5,
    ),
    IndexLookupData: ({"name": "index_lookup", "seq_len": 12}, 6),  # the row's seq_len / 2 content tokens
    NearestNeighborData: (
        {"name": "nearest_neighbor", "seq_len": 16, "nearest_neighbor": {"num_candidates": 5}},
        5,  # the candidates
    ),
}


def uniform_guess(metric: str, outcomes: float) -> float | None:
    """What guessing uniformly among ``outcomes`` answers scores, worked out here: right 1 time in outcomes
    (top-5: min(5, outcomes) in outcomes), a loss of ln(outcomes) nats, its exponential as perplexity."""
    return {
        "top1": 100 / outcomes,
        "accuracy": 100 / outcomes,
        "top5": 100 * min(5, outcomes) / outcomes,
        "val_loss": math.log(outcomes),
        "perplexity": math.exp(math.log(outcomes)),
    }.get(metric)


def test_every_data_set_has_an_example():
    assert set(EXAMPLES) == set(DATA_SETS)


@pytest.mark.parametrize("cls", DATA_SETS, ids=lambda cls: cls.__name__)
def test_every_data_set_scores_chance_as_a_uniform_guess_among_its_outcomes(cls, monkeypatch):
    """Each data set's chance score, for every metric its trials report, equals the uniform guess among the
    outcomes stated above; GLUE's average has none."""
    if cls.root_env:
        monkeypatch.delenv(cls.root_env, raising=False)  # a tokenizer.json found there would set the vocabulary
    fields, outcomes = EXAMPLES[cls]
    spec = data_spec(**fields)
    assert type(spec) is cls
    assert spec.outcomes() == pytest.approx(outcomes)
    for metric in MODALITY_METRICS[cls.modality]:
        expected = uniform_guess(metric, outcomes)
        assert spec.chance_score(metric) == (None if expected is None else pytest.approx(expected)), metric
    assert spec.chance_score("glue_avg") is None
    assert spec.chance_score("no_such_metric") is None


@pytest.mark.parametrize(
    ("fields", "scores"),
    [
        ({"name": "digits"}, {"top1": 10.0, "top5": 50.0, "val_loss": math.log(10)}),
        ({"name": "cifar10"}, {"top1": 10.0, "top5": 50.0, "val_loss": math.log(10)}),
        ({"name": "cifar100"}, {"top1": 1.0, "top5": 5.0, "val_loss": math.log(100)}),
        ({"name": "imagefolder"}, {"top1": 0.1, "top5": 0.5, "val_loss": math.log(1000)}),  # ImageNet's 1000
        ({"name": "listops", "seq_len": 64}, {"accuracy": 10.0, "val_loss": math.log(10)}),
        ({"name": "mqar", "seq_len": 16, "mqar": {"vocab_size": 32, "num_kv_pairs": 2}}, {"accuracy": 50.0}),
        ({"name": "mlm_corpus", "seq_len": 32}, {"perplexity": 32768.0, "glue_avg": None}),  # WordPiece default
        ({"name": "repeated_tokens", "seq_len": 64}, {"accuracy": 100 / 11, "perplexity": 11.0}),  # (6 + 16) / 2
        ({"name": "index_lookup", "seq_len": 16}, {"accuracy": 12.5, "val_loss": math.log(8)}),
        ({"name": "nearest_neighbor", "seq_len": 16}, {"accuracy": 12.5, "perplexity": 8.0}),  # 8 candidates
    ],
)
def test_chance_levels_at_the_defaults(fields, scores, monkeypatch):
    """The numbers docs/data.md's table gives, at each data set's defaults."""
    spec = data_spec(**fields)
    if spec.root_env:
        monkeypatch.delenv(spec.root_env, raising=False)
    assert {metric: spec.chance_score(metric) for metric in scores} == {
        metric: None if value is None else pytest.approx(value) for metric, value in scores.items()
    }


def test_a_metric_without_a_chance_rule_has_no_chance_score():
    assert [name for name, metric in METRICS.items() if metric.chance is None] == ["glue_avg"]
