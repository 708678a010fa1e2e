"""LRA's own ListOps files, ``basic_{train,val,test}.tsv`` (header ``Source<TAB>Target``), under ``data.root``
(or ``$LRA_ROOT``; LRA's release: ``lra_release/listops-1000/``), tokenised as LRA does
(``workers/data/listops.py`` defines the format and the ids). Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from workers.data import listops
from workers.data.base import BatchSource, DataNotFoundError, SequenceDataSpec
from workers.data.splits import SequenceSplits

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch


class LRAListOpsData(SequenceDataSpec):
    """``data: {name: lra_listops, seq_len: N}``: each row truncated to its first ``seq_len`` tokens and padded
    with 0; the headline metric is scored on ``eval_split`` (``val`` or ``test``). ``limit_train`` /
    ``limit_val`` read only the first rows."""

    name: Literal["lra_listops"] = "lra_listops"
    root_env: ClassVar[str] = listops.LRA_ROOT_ENV

    def model_fields_from_data(self) -> dict:
        return {"seq_len": self.seq_len, "vocab_size": listops.VOCAB_SIZE, "num_classes": listops.NUM_CLASSES}

    def require_local(self) -> Path:
        root = self.resolve_root()
        missing = [name for name in listops.SPLIT_FILES.values() if not (root / name).is_file()]
        if missing:
            raise DataNotFoundError(
                f"lra_listops: expected LRA's ListOps files under {root}, but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} missing. Point `data.root` / ${listops.LRA_ROOT_ENV} at "
                "the folder holding basic_train.tsv, basic_val.tsv and basic_test.tsv (LRA's release: "
                "lra_release/listops-1000/), or write generated ones with `sweep data export listops --rows N "
                "--out DIR`. Nothing is downloaded."
            )
        return root

    def load_arrays(self) -> SequenceSplits:
        root = self.require_local()
        parts = []
        for split, limit in (("train", self.limit_train), (self.eval_split, self.limit_val)):
            rows = listops.read_tsv(root / listops.SPLIT_FILES[split], limit)
            ids, lengths = listops.encode_batch((source for source, _ in rows), self.seq_len)
            parts += [ids, lengths, np.fromiter((label for _, label in rows), dtype=np.int64, count=len(rows))]
        return SequenceSplits(
            "lra_listops", *parts, self.eval_split, self.seq_len, listops.VOCAB_SIZE, listops.NUM_CLASSES
        )

    def open_batches(self, device: torch.device, arrays: SequenceSplits | None = None) -> BatchSource:
        from workers.data.batches import SequenceBatches  # imports torch

        return SequenceBatches(arrays if arrays is not None else self.load_arrays(), self, device)
