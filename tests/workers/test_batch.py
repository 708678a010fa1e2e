"""A model's input either way (workers/batch.py): an image tensor, or a dict of sequence tensors."""

import torch
from torch import nn

from workers.batch import batch_size, device_of, forward, head, padding_mask, tensors, tokens_per_sample


class Sums(nn.Module):
    def forward(self, input_ids=None, attention_mask=None, images=None):
        return (input_ids * attention_mask).sum(1) if images is None else images.flatten(1).sum(1)


def test_images_and_sequences_alike():
    images = torch.ones(3, 1, 2, 2)
    tokens = {"input_ids": torch.tensor([[1, 2, 3], [4, 5, 6]]), "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}
    assert batch_size(images) == 3 and batch_size(tokens) == 2
    assert tokens_per_sample(images) is None and tokens_per_sample(tokens) == 3
    assert padding_mask(images) is None
    assert padding_mask(tokens).tolist() == [[True, True, False], [True, False, False]]
    assert head(images, 2).shape == (2, 1, 2, 2) and head(tokens, 1)["input_ids"].tolist() == [[1, 2, 3]]
    assert len(tensors(tokens)) == 2 and tensors(images)[0] is images
    assert device_of(tokens) == torch.device("cpu")
    assert forward(Sums(), tokens).tolist() == [3, 4]  # 1 + 2, then 4 alone
    assert forward(lambda x: x.sum(), images).item() == 12
