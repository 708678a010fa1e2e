"""Masked-LM batches (``workers.data.mlm_corpus``'s data on a trial's device): BERT's masking rule,
:func:`mask_tokens`, and :class:`MLMBatches`, which masks each training batch afresh. Apart from the corpus
module so that reading a space's ``data:`` (validation, planning) imports no torch: the corpus opens these
when a trial opens its batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import torch

from workers.data.batches import TokenWindowBatches
from workers.data.glue_encoding import GlueArrays, glue_batches
from workers.data.splits import IGNORE_INDEX
from workers.data.text.tokenizer import SpecialIds

MASK_SHARE, RANDOM_SHARE = 0.8, 0.1  # of selected tokens: [MASK], a random token; the rest stay themselves


def mask_tokens(
    ids: torch.Tensor, generator: torch.Generator, mask_prob: float, specials: SpecialIds, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of ``ids`` (B, L) int64: ``(inputs, labels)``, both (B, L) int64 on ``ids``' device.

    *Candidates* are the positions whose id is none of the five special ids. Each candidate is *selected*
    independently with probability ``mask_prob``. A row with candidates but none selected gets one of its
    candidates selected, uniformly: a batch whose labels were all ignored would make the mean loss 0/0 = NaN
    (and a row with nothing scored is wasted), so no row with a candidate is ever left without a label.
    ``labels`` is the original id at selected positions and ``IGNORE_INDEX`` (-100) everywhere else. Each
    selected position of ``inputs`` becomes ``[MASK]`` with probability 0.8, a uniformly random non-special id
    (0 … vocab_size-1 less the five) with probability 0.1, and keeps its id with probability 0.1; every other
    position keeps its id.

    The random numbers (three uniform (B, L) tensors and one (B, L) tensor of replacement draws, always all
    four, in that order) come from ``generator`` on the CPU and are then moved to ``ids``' device, so the
    result depends only on the generator's state and the ids, never on the device.
    """
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_tokens: 0 < mask_prob < 1 must hold, but got (mask_prob={mask_prob})")
    if ids.dim() != 2:
        raise ValueError(f"mask_tokens: ids must be (batch, length), but got shape {tuple(ids.shape)}")
    device, shape = ids.device, tuple(ids.shape)
    special = torch.tensor(specials.all(), dtype=torch.long, device=device)
    ordinary = torch.ones(vocab_size, dtype=torch.bool, device=device)
    ordinary[special] = False
    ordinary_ids = torch.arange(vocab_size, device=device)[ordinary]
    select_u = torch.rand(shape, generator=generator).to(device)
    fallback_u = torch.rand(shape, generator=generator).to(device)
    action_u = torch.rand(shape, generator=generator).to(device)
    random_pick = torch.randint(0, max(len(ordinary_ids), 1), shape, generator=generator).to(device)

    candidates = ~torch.isin(ids, special)
    selected = candidates & (select_u < mask_prob)
    needs_one = candidates.any(dim=1) & ~selected.any(dim=1)
    fallback = torch.where(candidates, fallback_u, torch.full_like(fallback_u, -1.0)).argmax(dim=1)
    rows = needs_one.nonzero().squeeze(1)
    selected[rows, fallback[rows]] = True

    labels = torch.where(selected, ids, torch.full_like(ids, IGNORE_INDEX))
    inputs = ids.clone()
    to_mask = selected & (action_u < MASK_SHARE)
    to_random = selected & (action_u >= MASK_SHARE) & (action_u < MASK_SHARE + RANDOM_SHARE)
    inputs[to_mask] = specials.mask
    inputs[to_random] = ordinary_ids[random_pick[to_random]]
    return inputs, labels


class MLMBatches(TokenWindowBatches):
    """Batches of masked-LM windows from :class:`MLMSplits` (``workers.data.batches.TokenWindowBatches``):
    training windows are masked afresh per batch (:func:`mask_tokens`, from the trial's generator);
    validation windows are the fixed masked ones. The GLUE tasks stay in host memory and are moved to the
    device a batch at a time (:meth:`glue_batches`)."""

    def training_batch(self, index: torch.Tensor, generator: torch.Generator) -> tuple:
        """The windows at ``index`` masked by :func:`mask_tokens`; the masking comes from ``generator``."""
        s = self.splits
        inputs, labels = mask_tokens(self.ids_train[index].long(), generator, s.mask_prob, s.specials, s.vocab_size)
        return self._inputs(inputs), labels

    # --- GLUE fine-tuning ---

    @property
    def glue_tasks(self) -> list[str]:
        """The GLUE tasks loaded, in ``data.glue.tasks`` order."""
        return list(self.splits.glue)

    def glue_arrays(self, task: str) -> GlueArrays:
        """The encoded task ``task``; ``KeyError`` naming the tasks loaded otherwise."""
        if task not in self.splits.glue:
            loaded = ", ".join(self.splits.glue)
            raise KeyError(f"GLUE task {task!r} was not loaded; loaded: {loaded} (data.glue.tasks)")
        return self.splits.glue[task]

    def glue_batches(
        self, task: str, split: Literal["train", "dev"], batch_size: int, generator: torch.Generator | None = None
    ) -> Iterator[tuple]:
        """Batches of one split of a GLUE task (``workers.data.glue_encoding.glue_batches``)."""
        return glue_batches(self.glue_arrays(task), split, batch_size, self.device, generator)
