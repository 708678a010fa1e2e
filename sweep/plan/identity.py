"""A configuration's id: the one rule for what makes two trials the same experiment.

``config_id`` hashes everything that defines the experiment except the seed: the model's fields (shape and
data-derived sizes), the data set and its split, the training recipe and the probe settings, as sorted JSON,
SHA-256, first 16 hex digits. Two kinds of field are not part of it:

- **machine details**: where the data lives (``data.root``) and how many loader processes read it
  (``data.num_workers``), so the same config on another cluster has the same id;
- **fields added after ids were first recorded, at their default**: :data:`OMITTED_AT_DEFAULT` lists them
  with the value that leaves them out. A config that does not use such a field keeps the id it always had;
  one that sets it gets a new id, because it is a different experiment (compiled kernels and memory formats
  change rounding; an evaluation cadence changes what a scheduler sees; a probe's time share changes how
  many passes a measurement averages over).

The data set is hashed in the layout every id so far was computed from: one flat record of the fields all
data sets had in common (:data:`COMMON_DATA_FIELDS`, at the values a data set without them implies), and the
sequence fields for token data sets. Each data set's own class (``workers/data/``) no longer carries the
others' fields; this is where they are filled back in for the hash. ``tests/sweep/plan/test_identity.py`` pins every
shipped space × profile's ids, so a change that moves one fails there.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

from workers.data.base import DataSetSpec, SequenceDataSpec

MACHINE_FIELDS = ("root", "num_workers")
# The fields of the one flat data config ids were first computed from, at the value a data set that has no
# such field today implies (an image size, a class count or a digits split it never read).
COMMON_DATA_FIELDS = {
    "img_size": None,
    "num_classes": None,
    "val_fraction": 0.2,
    "split_seed": 0,
    "limit_train": None,
    "limit_val": None,
}
SEQUENCE_DATA_FIELDS = {"listops": None}  # every token data set's record held ListOps' options, unset
OMITTED_AT_DEFAULT = {
    # a data set's later fields, at the value that changes nothing ("a.b": field b of the option block a)
    "data": {"source": "folder", "hub": None, "glue.hub": None, "corpus.hub": None, "text.tokenizer_hub": None},
    "train": {"finetune": None, "compile": False, "channels_last": False, "eval_every_epochs": 1},
    "probes": {"probe_time_fraction": 0.02},
}


def data_identity(data: DataSetSpec) -> dict:
    """The data set's part of the id: its fields in the flat layout, machine details left out."""
    fields = {**COMMON_DATA_FIELDS, **(SEQUENCE_DATA_FIELDS if isinstance(data, SequenceDataSpec) else {})}
    fields |= data.model_dump(exclude=set(MACHINE_FIELDS))
    return without_later_defaults("data", fields)


def without_later_defaults(section: str, fields: dict) -> dict:
    """``fields`` without the section's :data:`OMITTED_AT_DEFAULT` fields that are at that value (a dotted
    name reaches into an option block)."""
    kept = dict(fields)
    for name, default in OMITTED_AT_DEFAULT.get(section, {}).items():
        *blocks, key = name.split(".")
        holder = kept
        for block in blocks:
            holder = holder.get(block) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and key in holder and holder[key] == default:
            del holder[key]
    return kept


def section_identity(section: str, settings: BaseModel) -> dict:
    """A recipe section (``train``, ``probes``) without the later fields at their defaults."""
    return without_later_defaults(section, settings.model_dump())


def config_id(model: dict, data: DataSetSpec, train: BaseModel, probes: BaseModel) -> str:
    """The id of the experiment ``model`` × ``data`` × ``train`` × ``probes`` (the module docstring's rule)."""
    identity = {
        "model": model,
        "data": data_identity(data),
        "train": section_identity("train", train),
        "probes": section_identity("probes", probes),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
