"""ImageNet-style class folders on local disk, ``root/train/<class>/*`` and ``root/val/<class>/*`` under
``data.root`` (or ``$IMAGENET_ROOT``), or an image repository on the Hugging Face Hub (``source: hub``; by
default ImageNet-1k, gated), read by each trial through a DataLoader. Nothing is downloaded by a trial."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from workers.data.base import BatchSource, DataMeta, DataNotFoundError, ImageDataSpec
from workers.data.hub import HubSourced

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

    from workers.data.loading import EpochSeededSampler

IMAGENET_ROOT_ENV = "IMAGENET_ROOT"
IMAGENET_TRAIN_IMAGES = 1_281_167  # ILSVRC-2012 training images (Russakovsky et al. 2015, Table 2)
HUB_REPO = "ILSVRC/imagenet-1k"  # source: hub, when data.hub.repo is left out (gated: accept its terms first)


class HubImages:
    """A Hub split of images as ``ImageFolder`` gives class folders: ``(transform(RGB image), class index)``
    per row of its ``image`` and ``label`` columns; ``classes`` are the label feature's names. A map-style
    dataset for ``torch.utils.data`` (``__len__`` and ``__getitem__``: all a DataLoader and a Subset read), not
    a subclass of torch's ``Dataset``, so that this module imports no torch."""

    def __init__(self, rows, transform, image_column: str = "image", label_column: str = "label"):
        self.rows, self.transform = rows, transform
        self.image_column, self.label_column = image_column, label_column
        self.classes = list(getattr(rows.features[label_column], "names", None) or sorted(set(rows[label_column])))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int):
        row = self.rows[int(index)]
        return self.transform(row[self.image_column].convert("RGB")), int(row[self.label_column])


class ImageFolderData(HubSourced, ImageDataSpec):
    """``data: {name: imagefolder}``: train/ and val/ must hold the same class folders. ``num_classes`` is the
    count expected (ImageNet: 1000), so a plan can size the model without reading the folders."""

    name: Literal["imagefolder"] = "imagefolder"
    root_env: ClassVar[str] = IMAGENET_ROOT_ENV
    native: ClassVar[tuple[int, int, int]] = (224, 3, 1000)

    num_classes: int | None = Field(
        default=None, ge=2, description="classes expected (ImageNet: 1000), for planning without the data"
    )
    hub_repo: ClassVar[str] = HUB_REPO

    def image_sets(self, train_transform, eval_transform) -> tuple:
        """(training, held-out) datasets of (image tensor, class index): ``ImageFolder`` over ``train/`` and
        ``val/``, or :class:`HubImages` over the Hub's splits."""
        if self.source == "hub":
            splits = self.hub_splits()
            return HubImages(splits.load("train"), train_transform), HubImages(splits.load("val"), eval_transform)
        from torchvision.datasets import ImageFolder

        root = self.require_local()
        return ImageFolder(str(root / "train"), train_transform), ImageFolder(str(root / "val"), eval_transform)

    def classes(self) -> int:
        return self.num_classes or self.native[2]

    def known_train_size(self) -> int | None:
        """ImageNet-1k's training split, 1,281,167 images, for the ImageNet this data set defaults to: the Hub's
        ImageNet-1k, or class folders of 1,000 classes (or an unstated count); None for another repository or
        class count, whose size only reading it would tell (``sweep plan --train-samples N`` gives it)."""
        if self.source == "hub":
            return IMAGENET_TRAIN_IMAGES if (self.hub is None or self.hub.repo in (None, HUB_REPO)) else None
        return IMAGENET_TRAIN_IMAGES if self.num_classes in (None, 1000) else None

    def require_local(self) -> Path | None:
        if self.source == "hub":  # read through the datasets cache: a missing split is a one-line error at load
            return None
        root = self.resolve_root()
        for split in ("train", "val"):
            if not (root / split).is_dir():
                raise DataNotFoundError(
                    f"imagefolder: expected class folders under {root / split}, which does not exist. "
                    f"Point `data.root` / ${IMAGENET_ROOT_ENV} at a folder holding train/ and val/. "
                    "Nothing is downloaded."
                )
        return root

    def open_batches(self, device: torch.device, arrays=None) -> BatchSource:
        return FolderBatches(self, device)


class FolderBatches:
    """ImageNet-style ``root/train/<class>/*`` and ``root/val/<class>/*`` through a DataLoader.

    Training uses timm's standard transform (random-resized crop, flip, colour jitter, ImageNet
    normalisation); validation resizes and centre-crops (timm's eval transform, crop 0.875).

    Loader settings follow :func:`loader_settings` with ``cpus``: the trial's CPUs, by default its torch
    thread count (``execute`` sets that from the config's ``threads``, which the sweep sets to the space's
    ``resources.cpus_per_trial``). One training loader per batch size and share, and one validation loader
    per batch size, are kept, so their workers persist across epochs. Training batches are augmented per
    sample as :class:`SeededSamples` says.

    ``train_batches(..., shard=(rank, world_size))`` yields only that rank's share of each global batch and
    decodes only those samples (:class:`ShareBatchSampler`); ``loads_shares`` tells
    ``workers.distributed.ShardedBatches`` so.
    """

    loads_shares = True  # train_batches takes shard=(rank, world_size) and decodes only that share

    def __init__(self, spec: ImageFolderData, device: torch.device, cpus: int | None = None):
        import torch
        from timm.data import create_transform

        from workers.data.loading import loader_settings

        self.img_size = spec.img_size or 224
        self.device = device
        self.spec = spec
        self.settings = loader_settings(spec.num_workers, cpus or torch.get_num_threads(), device.type)
        self.train_set, self.val_set = spec.image_sets(
            create_transform(self.img_size, is_training=True), create_transform(self.img_size, is_training=False)
        )
        if self.train_set.classes != self.val_set.classes:
            raise DataNotFoundError(
                f"imagefolder: the training and held-out splits of {spec.data_identity()} hold different classes "
                f"({len(self.train_set.classes)} vs {len(self.val_set.classes)}); they must match"
            )
        if spec.limit_train:
            self.train_set = torch.utils.data.Subset(self.train_set, range(min(spec.limit_train, len(self.train_set))))
        if spec.limit_val:
            self.val_set = torch.utils.data.Subset(self.val_set, range(min(spec.limit_val, len(self.val_set))))
        self._probe: torch.Tensor | None = None
        self._train_loaders: dict[tuple, tuple[torch.utils.data.DataLoader, EpochSeededSampler]] = {}
        self._val_loaders: dict[int, torch.utils.data.DataLoader] = {}

    @property
    def num_classes(self) -> int:
        import torch

        dataset = self.val_set.dataset if isinstance(self.val_set, torch.utils.data.Subset) else self.val_set
        return len(dataset.classes)

    @property
    def meta(self) -> DataMeta:
        return DataMeta(self.num_classes, 3, self.img_size, len(self.train_set), len(self.val_set))

    def steps_per_epoch(self, batch_size: int) -> int:
        return len(self.train_set) // batch_size

    def _loader(self, dataset, **options) -> torch.utils.data.DataLoader:
        # The loader's own generator only seeds its workers' streams, which SeededSamples reseeds per sample;
        # a fixed one keeps the loader from drawing on the trial's global torch stream.
        import torch

        base_seed = torch.Generator().manual_seed(0)
        settings = {**self.settings, **options}
        return torch.utils.data.DataLoader(dataset, generator=base_seed, **settings)

    def train_loader(
        self, batch_size: int, generator: torch.Generator, shard: tuple[int, int] = (0, 1)
    ) -> torch.utils.data.DataLoader:
        """The (persistent) training loader for ``batch_size`` and ``shard`` (:class:`ShareBatchSampler`);
        its next epoch draws from ``generator``."""
        from workers.data.loading import EpochSeededSampler, SeededSamples, ShareBatchSampler

        key = (batch_size, shard)
        if key not in self._train_loaders:
            sampler = EpochSeededSampler(len(self.train_set), generator)
            batches = ShareBatchSampler(sampler, batch_size, shard)
            self._train_loaders[key] = (self._loader(SeededSamples(self.train_set), batch_sampler=batches), sampler)
        loader, sampler = self._train_loaders[key]
        sampler.generator = generator  # read in this process when an epoch's iteration starts
        return loader

    def train_batches(
        self, batch_size: int, generator: torch.Generator, shard: tuple[int, int] = (0, 1)
    ) -> Iterator[tuple]:
        """One epoch of global batches of ``batch_size``, or of rank r's share of each, samples
        [r·B/N, (r+1)·B/N) with ``shard=(r, N)``, only those decoded; the order comes from ``generator``."""
        for images, labels in self.train_loader(batch_size, generator, shard):
            yield images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)

    def val_batches(self, batch_size: int) -> Iterator[tuple]:
        if batch_size not in self._val_loaders:
            self._val_loaders[batch_size] = self._loader(self.val_set, batch_size=batch_size, shuffle=False)
        for images, labels in self._val_loaders[batch_size]:
            yield images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)

    def probe_images(self, count: int) -> torch.Tensor:
        import torch

        if self._probe is None or len(self._probe) < count:
            images = [self.val_set[i][0] for i in range(min(count, len(self.val_set)))]
            self._probe = torch.stack(images).to(self.device)
        return self._probe[:count]
