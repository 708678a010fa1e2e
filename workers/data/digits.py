"""scikit-learn's bundled 8×8 handwritten digits: 1,797 images, 10 classes, embedded (nothing to download)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import Field

from workers.data.base import BatchSource, ImageDataSpec
from workers.data.splits import ArraySplits

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch


class DigitsData(ImageDataSpec):
    """``data: {name: digits}``. Split once with a stratified shuffle seeded by ``split_seed`` (not the trial
    seed), so every trial of a sweep is scored on the same held-out images; ``val_fraction`` is the held-out
    share. Pixels 0…16 are rescaled to uint8 0…255. No augmentation: a flipped or shifted 8×8 digit is often
    another digit."""

    name: Literal["digits"] = "digits"
    native: ClassVar[tuple[int, int, int]] = (8, 1, 10)

    val_fraction: float = Field(default=0.2, gt=0.0, lt=1.0, description="held-out share")
    split_seed: int = Field(default=0, description="fixed split, shared by every trial")

    def data_identity(self) -> str:
        return "embedded:scikit-learn digits"

    def known_train_size(self) -> int:
        """scikit-learn's 1,797 images less the held-out ⌈val_fraction · 1797⌉ (train_test_split's rounding)."""
        return 1797 - math.ceil(self.val_fraction * 1797)

    def load_arrays(self) -> ArraySplits:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[:, None, :, :]
        labels = digits.target.astype(np.int64)
        x_train, x_val, y_train, y_val = train_test_split(
            images, labels, test_size=self.val_fraction, random_state=self.split_seed, stratify=labels
        )
        mean = float(x_train.mean() / 255.0)
        std = float(x_train.std() / 255.0)
        splits = ArraySplits("digits", x_train, y_train, x_val, y_val, 10, (mean,), (std,), augment=False)
        return splits.first_rows(self.limit_train, self.limit_val)

    def open_batches(self, device: torch.device, arrays: ArraySplits | None = None) -> BatchSource:
        from workers.data.batches import TensorBatches  # imports torch

        return TensorBatches(arrays if arrays is not None else self.load_arrays(), self, device)
