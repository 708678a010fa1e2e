"""The data sets by name (workers/data/registry.py). The test over every entry of ``DATA_SETS`` here, as the one
over ``FAMILIES`` covers every family: each is found by its name, validates back to itself, and either gives
batches of the shapes its config promises (generated and embedded data) or, on disk and with no root set,
refuses in seconds naming where to point it (tests/workers/data/test_base.py runs over them for chance levels)."""

from __future__ import annotations

import pydantic
import pytest
import torch

from tests.workers.data.test_base import EXAMPLES
from workers.data.base import DataNotFoundError
from workers.data.registry import (
    DATA_SET_NAMES,
    DATA_SETS,
    data_set_class,
    data_spec,
    fields_taken_by,
    load_arrays,
    modality_of,
    names_of,
    open_batches,
)


@pytest.mark.parametrize("cls", DATA_SETS, ids=lambda cls: cls.__name__)
def test_every_data_set_is_found_by_name_and_gives_what_its_config_promises(cls, monkeypatch):
    if cls.root_env:
        monkeypatch.delenv(cls.root_env, raising=False)
    spec = data_spec(**EXAMPLES[cls][0])
    assert data_set_class(spec.name) is cls and modality_of(spec.name) == cls.modality and spec.name in names_of(cls)
    assert data_spec(**spec.model_dump()) == spec
    if cls.root_env:  # on disk: nothing set, so a clear refusal that names the variable, before reading anything
        with pytest.raises(DataNotFoundError, match=cls.root_env):
            spec.require_local()
        return
    fields = spec.model_fields_from_data()
    tiny = spec.tiny_copy(8)
    source = open_batches(tiny, torch.device("cpu"), load_arrays(tiny))
    inputs, labels = next(iter(source.train_batches(4, torch.Generator().manual_seed(0))))
    assert source.steps_per_epoch(4) == 2 and spec.data_identity().split(":")[0] in ("generated", "embedded")
    if cls.modality == "image":
        assert inputs.shape == (4, fields["in_chans"], fields["img_size"], fields["img_size"])
    else:
        ids = inputs["input_ids"]
        assert ids.shape == (4, fields["seq_len"]) and int(ids.min()) >= 0 and int(ids.max()) < fields["vocab_size"]
    scored = labels[labels != -100]  # per-token labels mark the positions not scored with -100
    assert len(labels) == 4 and len(scored) > 0
    assert int(scored.min()) >= 0 and int(scored.max()) < fields["num_classes"]
    val = [len(labels) for _, labels in source.val_batches(4)]
    assert sum(val) == 8


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="unknown data set 'digts'; known: digits"):
        data_set_class("digts")
    with pytest.raises(pydantic.ValidationError, match="unknown data set"):
        data_spec(name="digts")
    assert data_spec().name == "digits"  # no name: the default


def test_every_name_is_one_class_and_cifar_answers_to_two():
    assert len(DATA_SET_NAMES) == len(set(DATA_SET_NAMES)) == sum(len(names_of(cls)) for cls in DATA_SETS)
    assert set(names_of(data_set_class("cifar10"))) == {"cifar10", "cifar100"}


def test_fields_taken_by_names_the_data_sets_with_that_key():
    assert fields_taken_by("mqar") == ["mqar"]
    assert set(fields_taken_by("limit_train")) == set(DATA_SET_NAMES)
