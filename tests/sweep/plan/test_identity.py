"""Config ids are the identity of an experiment across sweeps, reruns and machines: the rule is
``sweep/plan/identity.py``, tested here. ``tests/fixtures/plan_ids.json`` pins every shipped space × profile's ids,
parameter counts and FLOPs as planned before the data sets became a registry; tests/sweep/space/test_loader.py, which
plans every profile anyway, checks each against it."""

import pytest

from sweep.plan.identity import config_id
from workers.config import ProbeSpec, TrainSpec
from workers.data.registry import data_spec

MODEL = {"family": "vit", "depth": 1, "num_heads": 2, "head_dim": 8, "embed_dim": 16, "mlp_dim": 32}


def test_machine_details_are_not_part_of_the_id():
    here = data_spec(name="imagefolder", root="/data/imagenet", num_workers=7)
    there = data_spec(name="imagefolder", root="/mnt/other", num_workers=0)
    assert config_id(MODEL, here, TrainSpec(), ProbeSpec()) == config_id(MODEL, there, TrainSpec(), ProbeSpec())


@pytest.mark.parametrize(
    ("section", "changed"),
    [
        ("train", {"compile": True}),
        ("train", {"channels_last": True}),
        ("train", {"eval_every_epochs": 2}),
        ("train", {"finetune": {}}),
        ("probes", {"probe_time_fraction": 0.05}),
        ("probes", {"probe_time_fraction": None}),
    ],
)
def test_a_later_field_joins_the_id_only_when_set_away_from_its_default(section, changed):
    data = data_spec(name="digits")
    train, probes = TrainSpec(), ProbeSpec()
    base = config_id(MODEL, data, train, probes)
    spelled_out = {"train": TrainSpec(eval_every_epochs=1), "probes": ProbeSpec(probe_time_fraction=0.02)}
    assert config_id(MODEL, data, spelled_out["train"], spelled_out["probes"]) == base
    if section == "train":
        train = TrainSpec(**changed)
    else:
        probes = ProbeSpec(**changed)
    assert config_id(MODEL, data, train, probes) != base


def test_every_data_field_that_defines_the_experiment_moves_the_id():
    ids = {
        config_id(MODEL, data_spec(**fields), TrainSpec(), ProbeSpec())
        for fields in (
            {"name": "digits"},
            {"name": "digits", "split_seed": 1},
            {"name": "digits", "limit_val": 90},
            {"name": "cifar10"},
            {"name": "mqar", "seq_len": 64},
            {"name": "mqar", "seq_len": 64, "mqar": {"seed": 1}},
            {"name": "mqar", "seq_len": 128},
        )
    }
    assert len(ids) == 7
