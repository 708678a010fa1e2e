"""What every data set's loader shares: the error for data that is not on this machine, the metadata a
model is built from, and two rules over in-memory token splits. ``workers/data.py`` (images, the
dispatcher) and the token loaders (``lm_data``, ``mlm_data``, ``listops``) both import it, and it imports
neither, so the loaders never import each other in a circle."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from workers.config import DataSpec


class DataNotFoundError(FileNotFoundError):
    """A data set that must be on local disk is not there. The message says where it looked and how to
    point the tool elsewhere; the tool never downloads."""


@dataclass(frozen=True)
class DataMeta:
    """What the model needs to know about the data: its input shape and number of classes.

    Token sequences set ``seq_len`` (tokens per sample, padding included) and ``vocab_size``; their
    ``in_chans`` and ``img_size`` are placeholders (1), not read for sequence models. ``val_size`` counts the
    held-out split scored (``eval_split``). Language-model data also names its tokenizer (``tokenizer``: see
    :class:`LMSplits`; None for generated ids)."""

    num_classes: int
    in_chans: int
    img_size: int
    train_size: int
    val_size: int
    seq_len: int | None = None
    vocab_size: int | None = None
    tokenizer: str | None = None


def keep_first_rows(splits, spec: DataSpec):
    """Token splits (:class:`SequenceSplits`, :class:`LMSplits`) with only the first ``limit_train`` rows of
    every ``*_train`` array and the first ``limit_val`` rows of every ``*_eval`` array."""
    train, held_out = slice(spec.limit_train), slice(spec.limit_val)
    arrays = {field.name: getattr(splits, field.name) for field in dataclasses.fields(splits)}
    kept = {name: value[train] for name, value in arrays.items() if name.endswith("_train")}
    kept |= {name: value[held_out] for name, value in arrays.items() if name.endswith("_eval")}
    return dataclasses.replace(splits, **kept)


def require_same_length(splits, spec: DataSpec) -> None:
    """Token arrays loaded for one ``seq_len`` cannot serve a config that asks for another."""
    if spec.seq_len is not None and spec.seq_len != splits.seq_len:
        raise ValueError(
            f"the loaded {splits.name} arrays have seq_len={splits.seq_len}, but the config asks for "
            f"seq_len={spec.seq_len}; load them again for this config"
        )
