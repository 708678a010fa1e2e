"""What a planned trial will need before it runs: its peak memory on a GPU and its training time.

Peak memory follows the measured definition (``workers/probes/memory.py``, docs/measurements.md): what one
training step needs at its worst moment. Estimated as

    peak_memory_bytes = 16 · params + batch_size · activation_bytes_per_sample · precision_factor

- 16 B per parameter: fp32 weights (4; under bf16 autocast the weights stay fp32 and are the master copy,
  so there is no second copy), fp32 gradients (4) and AdamW's two fp32 moments (8).
- ``activation_bytes_per_sample``: the bytes of the tensors autograd saves for the backward pass in a
  float32 forward of one sample, parameters left out, counted on the meta device (shapes only, so free and
  possible for models that would not fit in memory), each storage once. Attention is counted as the fused
  kernel training uses saves it (q, k, v, output, log-sum-exp), not as the meta device's math path would.
- ``precision_factor``: 1 in float32 (CPU trials); under bf16 autocast (CUDA with ``train.amp_bf16``) most
  saved tensors are bf16 but norms, softmax statistics and the residual stream stay fp32, so the factor is
  calibrated on a measurement: ViT-B/16 on an H200 (``bench/measured/h200-2026-12-04/cuda_memory_check.json``)
  grows 68,988,644 B per sample, and this module counts 118,160,680 fp32 B saved per sample for the same model
  (gpu-check's ViT-B/16 spec): 0.5839. One model calibrates it; other families' bf16 mixes differ, which is
  why the figure is an estimate.

Training time is the planned FLOPs at a model FLOP utilisation (MFU):

    train_time_s = 3 · flops_per_sample · training_samples / (peak_flops_per_s · mfu)

``flops_per_sample`` is the plan's forward count (``workers/probes/flops.py``: forward only); a training step
is forward plus backward, which costs twice the forward (gradients for inputs and for weights): 3×. It is the
time of the training steps alone (evaluation and probes come on top). ``training_samples`` is steps × batch:
``epochs · ⌊train_size / batch⌋`` steps (the ragged last batch is dropped), capped at ``train.max_steps``.

torch is imported only when a model's activations are counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweep.plan.plan import PlannedConfig
    from sweep.space.model import Space

GIB = 1024**3
BYTES_PER_PARAM = 16  # fp32 weights 4 + fp32 gradients 4 + AdamW's two fp32 moments 8
# Measured ViT-B/16 bf16 activation bytes per sample (H200, cuda_memory_check.json: activation_bytes_per_sample)
# ÷ this module's fp32 saved-tensor count per sample for the same model (activation_bytes_per_sample below).
BF16_ACTIVATION_FACTOR = 68_988_644 / 118_160_680
# assumed when no gpu-check result is given: near the 0.291 of its data-sheet peak an H200 reached training ViT-B/16
# at batch 256 under bf16 autocast (bench/measured/h200-2026-12-04/gpu_check_b256.json)
DEFAULT_MFU = 0.30


@dataclass(frozen=True)
class Gpu:
    """A GPU's memory (bytes) and its dense bf16 tensor-core peak (FLOP/s, without sparsity)."""

    name: str
    memory_bytes: int
    bf16_flops_per_s: float
    source: str


# Figures from each vendor's data sheet: memory as sold, bf16 dense (the sheets quote bf16 "with sparsity",
# twice these). H100/H200 SXM: NVIDIA H100 and H200 Tensor Core GPU data sheets (989 TFLOP/s bf16 dense);
# A100: NVIDIA A100 data sheet (312 TFLOP/s bf16 dense); L40S: NVIDIA L40S data sheet (362 TFLOP/s bf16
# dense, 733 with sparsity); RTX 4090: NVIDIA Ada Lovelace architecture whitepaper (165 TFLOP/s bf16 dense
# with fp32 accumulate halved on GeForce: 165.2 with fp16/bf16 accumulate, 82.6 with fp32; the figure here is
# the fp32-accumulate one that PyTorch's bf16 matmuls use).
GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu("h100-80gb", 80 * 10**9, 989e12, "NVIDIA H100 SXM data sheet"),
        Gpu("h200-141gb", 141 * 10**9, 989e12, "NVIDIA H200 SXM data sheet"),
        Gpu("a100-80gb", 80 * 10**9, 312e12, "NVIDIA A100 data sheet"),
        Gpu("a100-40gb", 40 * 10**9, 312e12, "NVIDIA A100 data sheet"),
        Gpu("l40s-48gb", 48 * 10**9, 362e12, "NVIDIA L40S data sheet"),
        Gpu("rtx4090-24gb", 24 * 10**9, 82.6e12, "NVIDIA Ada Lovelace whitepaper (fp32 accumulate)"),
    )
}


def gpu_named(name: str) -> Gpu:
    """The table's GPU of that name, or the one GPU whose name starts with it (``h100`` is ``h100-80gb``); a
    one-line error listing the candidates for a prefix several start with (``a100``), or the known names."""
    key = name.lower()
    if key in GPUS:
        return GPUS[key]
    starting = [gpu for gpu in GPUS if gpu.startswith(key)] if key else []
    if len(starting) == 1:
        return GPUS[starting[0]]
    if starting:
        raise ValueError(f"GPU {name!r} could be {' or '.join(starting)}: give the whole name")
    known = ", ".join(GPUS)
    raise ValueError(f"unknown GPU {name!r}: known are {known}; or give --gpu-memory-gib and --gpu-tflops")


def mfu_from_gpu_check(result: dict, peak_flops: float | None = None) -> float:
    """The MFU a ``make gpu-check`` result JSON measured. Its ``mfu`` is 3 · forward FLOPs · train samples/s ÷
    the matmul rate it measured (``peak_flops_per_s``), not the data sheet's peak; with ``peak_flops`` (the
    peak the estimate divides by) it is restated against that: the achieved FLOP/s ÷ ``peak_flops``, so that
    the estimate reproduces the measured rate. Right for the GPU model the check ran on."""
    mfu = result.get("mfu")
    if not isinstance(mfu, int | float) or not 0 < mfu <= 1:
        raise ValueError(f"the gpu-check result has no MFU in (0, 1] (got mfu={mfu!r}); run `make gpu-check` again")
    measured_peak = result.get("peak_flops_per_s")
    if peak_flops is None or not isinstance(measured_peak, int | float):
        return float(mfu)
    return float(mfu) * measured_peak / peak_flops


# --- memory -----------------------------------------------------------------------------------------------


def precision_factor(space: Space, device: str = "cuda") -> float:
    """Bytes of saved activations relative to float32: bf16 autocast applies on CUDA when the recipe asks."""
    return BF16_ACTIVATION_FACTOR if device == "cuda" and space.train.amp_bf16 else 1.0


def peak_memory_bytes(config: PlannedConfig, space: Space, device: str = "cuda") -> int:
    """Estimated peak memory of one training step of ``config`` at the space's (profile's) batch size, on
    ``device`` ("cuda": bf16 autocast if the recipe asks; "cpu": float32). Module docstring: the formula."""
    activations = activation_bytes_per_sample(config.model) * precision_factor(space, device)
    return int(BYTES_PER_PARAM * config.params + space.train.batch_size * activations)


def activation_bytes_per_sample(model: dict) -> int:
    """Bytes autograd saves for backward in a float32 forward of one sample of ``model`` (ModelSpec fields),
    parameters left out, each storage once; counted at depths 1 and 2 and extended linearly in depth, as the
    planner counts parameters and FLOPs (``depth`` repeats identical blocks)."""
    from sweep.space.shapes import freeze

    one = _saved_bytes(freeze({**model, "depth": 1}))
    if model["depth"] == 1:
        return one
    two = _saved_bytes(freeze({**model, "depth": 2}))
    return one + (model["depth"] - 1) * (two - one)


@lru_cache(maxsize=1024)
def _saved_bytes(frozen: tuple) -> int:
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    from workers.batch import forward
    from workers.config import ModelSpec
    from workers.models import build_on_meta, example_input

    spec = ModelSpec(**dict(frozen))
    model = build_on_meta(spec)
    model.train()
    weights = {p.untyped_storage()._cdata for p in model.parameters()}
    saved: dict[int, int] = {}
    inside_attention = [False]

    def keep(tensor) -> None:
        storage = tensor.untyped_storage()
        if storage._cdata not in weights:
            saved[storage._cdata] = storage.nbytes()

    def pack(tensor):
        if not inside_attention[0]:
            keep(tensor)
        return tensor

    class FusedAttention(TorchFunctionMode):
        """On the meta device SDPA takes its math path, which saves the N×N attention matrix; training on
        CUDA or CPU takes a fused kernel that saves q, k, v, the output and a float32 log-sum-exp per query
        and head. Count what the fused kernel saves. Its output is laid out (batch, query, head, dim), so the
        output projection's saved input is a view of it: counted there, once (a real CPU forward agrees)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is not F.scaled_dot_product_attention:
                return func(*args, **kwargs)
            inside_attention[0] = True
            try:
                out = func(*args, **kwargs)
            finally:
                inside_attention[0] = False
            names = ("query", "key", "value")
            for tensor in [args[i] if i < len(args) else kwargs[name] for i, name in enumerate(names)]:
                keep(tensor)
            saved[-id(out)] = out[..., 0].numel() * 4  # log-sum-exp: one float32 per (batch, head, query)
            return out

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), FusedAttention():
        forward(model, example_input(spec, "meta"))
    return sum(saved.values())


# --- time -------------------------------------------------------------------------------------------------


def train_size(space: Space) -> int | None:
    """Training samples per epoch, where known without reading the data: ``limit_train``, the data set's
    ``known_train_size``, or a generated data set's ``train_rows``; None otherwise."""
    data = space.data
    known = _known_train_size(data)
    limit = data.limit_train
    if known is None:
        return limit
    return min(known, limit) if limit else known


def _known_train_size(data) -> int | None:
    known = data.known_train_size()
    return known if known is not None else _find_key(data.model_dump(), "train_rows")


def _find_key(tree: object, key: str) -> int | None:
    if isinstance(tree, dict):
        if isinstance(tree.get(key), int):
            return tree[key]
        for value in tree.values():
            found = _find_key(value, key)
            if found is not None:
                return found
    return None


def training_samples(space: Space, samples_per_epoch: int | None = None) -> int | None:
    """Samples the training steps process: steps × batch (module docstring); None when the training split's
    size is unknown and no ``max_steps`` bounds it."""
    train = space.train
    size = samples_per_epoch if samples_per_epoch is not None else train_size(space)
    if size is None:
        return train.max_steps * train.batch_size if train.max_steps else None
    steps = train.epochs * (size // train.batch_size)
    if train.max_steps:
        steps = min(steps, train.max_steps)
    return steps * train.batch_size


def train_time_s(
    config: PlannedConfig, space: Space, peak_flops: float, mfu: float, samples_per_epoch: int | None = None
) -> float | None:
    """Seconds of training steps for one trial of ``config`` at ``peak_flops`` (FLOP/s) × ``mfu``: 3 × the
    forward FLOPs per sample × the training samples (module docstring); None when the samples are unknown."""
    samples = training_samples(space, samples_per_epoch)
    if samples is None:
        return None
    return 3 * config.flops_per_sample * samples / (peak_flops * mfu)
