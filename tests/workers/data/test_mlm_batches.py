"""BERT's masking rule (``mask_tokens``) of workers/data/mlm_batches.py; MLMBatches over a corpus is tested with
the corpus (tests/workers/data/test_mlm_corpus.py)."""

import pytest
import torch

from workers.data.mlm_batches import mask_tokens
from workers.data.splits import IGNORE_INDEX
from workers.data.text.tokenizer import SpecialIds

# --- masking ----------------------------------------------------------------------------------------------------


SPECIALS = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)


def test_mask_tokens_follows_berts_rule():
    vocab, rows, length, prob = 1000, 512, 128, 0.25
    ids = torch.randint(5, vocab, (rows, length), generator=torch.Generator().manual_seed(1))
    ids[:, ::10] = SPECIALS.sep
    ids[:, 0] = SPECIALS.cls
    ids[::7, -3:] = SPECIALS.pad
    ids[::5, 5] = SPECIALS.unk
    inputs, labels = mask_tokens(ids, torch.Generator().manual_seed(0), prob, SPECIALS, vocab)
    assert inputs.shape == labels.shape == ids.shape and inputs.dtype == labels.dtype == torch.int64
    special = torch.isin(ids, torch.tensor(SPECIALS.all()))
    selected = labels != IGNORE_INDEX
    assert not (selected & special).any()  # specials are never selected
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(inputs[~selected], ids[~selected])
    assert abs(selected.sum().item() / (~special).sum().item() - prob) < 0.01
    masked = (inputs == SPECIALS.mask) & selected
    kept = (inputs == ids) & selected
    replaced = selected & ~masked & ~kept
    count = selected.sum().item()
    assert abs(masked.sum().item() / count - 0.8) < 0.015
    assert abs(kept.sum().item() / count - 0.1) < 0.01  # a random draw equal to the id counts here: 1 in 995
    assert abs(replaced.sum().item() / count - 0.1) < 0.01
    assert inputs[replaced].min() >= 5 and inputs[replaced].max() < vocab  # random non-special ids
    again = mask_tokens(ids, torch.Generator().manual_seed(0), prob, SPECIALS, vocab)
    assert torch.equal(again[0], inputs) and torch.equal(again[1], labels)
    other = mask_tokens(ids, torch.Generator().manual_seed(1), prob, SPECIALS, vocab)
    assert not torch.equal(other[1], labels)


def test_every_row_with_a_candidate_gets_a_label():
    ids = torch.randint(5, 50, (300, 4), generator=torch.Generator().manual_seed(2))
    ids[0] = SPECIALS.pad  # no candidate: nothing can be scored there
    ids[1, 1:] = SPECIALS.sep  # one candidate: it must be the one
    _, labels = mask_tokens(ids, torch.Generator().manual_seed(3), 0.02, SPECIALS, 50)
    scored = (labels != IGNORE_INDEX).sum(dim=1)
    assert scored[0] == 0 and labels[1, 0] == ids[1, 0]
    assert (scored[1:] >= 1).all()
    with pytest.raises(ValueError, match="mask_prob"):
        mask_tokens(ids, torch.Generator(), 1.0, SPECIALS, 50)
