"""The data sets by name (workers/data/registry.py). The test over every entry of ``DATA_SETS`` here, as the one
over ``FAMILIES`` covers every family: each is found by its name, validates back to itself, and either gives
batches of the shapes its config promises (generated and embedded data) or, on disk and with no root set,
refuses in seconds naming where to point it (tests/workers/data/test_base.py runs over them for chance levels)."""

from __future__ import annotations

import pydantic
import pytest
import torch
from pydantic import ValidationError

from sweep.errors import SpaceError
from sweep.space.loader import load_space
from tests.workers.data.test_base import EXAMPLES
from workers.data.base import DataNotFoundError
from workers.data.mqar import MQARSpec
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


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "mqar"}, "seq_len is required"),
        ({"name": "tinystories"}, "seq_len is required"),
        ({"name": "tinystories", "seq_len": 8, "mqar": {}}, r"tinystories\.mqar\n\s+Extra inputs are not permitted"),
        ({"name": "mqar", "seq_len": 8, "text": {}}, r"mqar\.text\n\s+Extra inputs are not permitted"),
        ({"name": "listops", "seq_len": 8, "text": {}}, r"listops\.text\n\s+Extra inputs are not permitted"),
        ({"name": "digits", "mqar": {}}, r"digits\.mqar\n\s+Extra inputs are not permitted"),
        ({"name": "cifar10", "text": {}}, r"cifar10\.text\n\s+Extra inputs are not permitted"),
        ({"name": "mqar", "seq_len": 8, "eval_split": "test"}, r"val split only.*eval_split='test'"),
        ({"name": "mqar", "seq_len": 8, "img_size": 8}, r"mqar\.img_size\n\s+Extra inputs are not permitted"),
        ({"name": "mqar", "seq_len": 8, "listops": {}}, r"mqar\.listops\n\s+Extra inputs are not permitted"),
        (
            {"name": "tinystories", "seq_len": 8, "text": {"tokenizer": "t.json", "vocab_size": 512}},
            r"vocab_size is for a tokenizer trained here.*tokenizer='t.json', vocab_size=512",
        ),
        ({"name": "tinystories", "seq_len": 8, "text": {"vocab_size": 100}}, "vocab_size"),
        ({"name": "tinystories", "seq_len": 8, "text": {"vocab": 100}}, "vocab"),
    ],
)
def test_data_spec_rules_for_language_models(data, message):
    with pytest.raises(ValidationError, match=message):
        data_spec(**data)


def test_a_key_of_another_data_set_is_reported_with_the_data_sets_that_take_it(tmp_path):
    """What a user sees: the file, the key path without pydantic's union tag, and where the key belongs."""
    path = tmp_path / "space.yaml"
    path.write_text(
        "question: q\nmodel: {family: gpt2, embed_dim: 16, mlp_dim: 32}\naxes: {depth: [1], num_heads: [2]}\n"
        "baseline: {depth: 1, num_heads: 2}\nmetric: {name: val_loss, tolerance: 0.1}\n"
        "data: {name: tinystories, seq_len: 8, mqar: {num_kv_pairs: 2}, img_sise: 8}\n"
    )
    with pytest.raises(SpaceError) as raised:
        load_space(str(path))
    message = str(raised.value)
    assert "data.mqar: mqar is not a field of data set 'tinystories'; it is for mqar" in message
    assert "set data.name to a data set that takes it" in message
    assert "data.img_sise: Extra inputs are not permitted" in message  # a typo: no data set takes it


def test_an_unknown_data_set_names_the_known_ones(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(
        "question: q\nmodel: {embed_dim: 16, mlp_dim: 32}\naxes: {depth: [1], num_heads: [2]}\n"
        "baseline: {depth: 1, num_heads: 2}\ndata: {name: mqa, seq_len: 8}\n"
    )
    with pytest.raises(SpaceError, match=r"data\.name: must name a registered data set.*got 'mqa'.*did you mean mqar"):
        load_space(str(path))


def test_data_spec_dumps():
    causal = {name for name in DATA_SET_NAMES if modality_of(name) == "causal_lm"}
    assert causal == {"mqar", "tinystories", "repeated_tokens", "index_lookup", "nearest_neighbor"}  # known answers
    assert not set(data_spec(name="cifar10").model_dump()) & {"seq_len", "eval_split", "listops", "mqar", "text"}
    assert not set(data_spec(name="listops", seq_len=8).model_dump()) & {"mqar", "text"}  # ListOps ids unchanged
    mqar = data_spec(name="mqar", seq_len=64, mqar={"num_kv_pairs": 4})
    assert "mqar" in mqar.model_dump() and "text" not in mqar.model_dump()
    assert data_spec(**mqar.model_dump()) == mqar
    text = data_spec(name="tinystories", seq_len=64, text={"train_tokens": 1000})
    assert "text" in text.model_dump() and "mqar" not in text.model_dump()
    assert data_spec(**text.model_dump()) == text
    assert MQARSpec() == MQARSpec(vocab_size=256, num_kv_pairs=8, power_a=0.01, train_rows=100_000, val_rows=3_000)
