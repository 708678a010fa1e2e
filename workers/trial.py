"""One trial: build the model, train it, measure it, and return a record of plain data.

``run_trial`` is the function Ray Tune calls on a worker and the one ``trial CONFIG`` calls without Ray
(so a trial can be stepped through with pdb). It never raises for a failed trial: the failure comes back
as a record with ``status`` (``diverged``, ``oom`` or ``error``) and the message, beside whatever was
measured before it failed.

    trial config.json                # run, print the record as JSON
    trial config.yaml --out rec.json # also write it to a file
    trial config.json --pdb          # let exceptions through and open the debugger where they happen
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import timm
import torch

from workers.batch import batch_size, head, tensors, tokens_per_sample
from workers.config import ModelSpec
from workers.data.base import DataMeta
from workers.data.registry import open_batches
from workers.data.splits import ArraySplits
from workers.devices import describe_device, resolve_device
from workers.distributed import DataParallel, Rank
from workers.finetune import finetune_glue, glue_fields
from workers.metrics import epoch_key
from workers.models import build_model, get_family, num_tokens
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer, summarise_kappa
from workers.probes.memory import live_storage_bytes, peak_train_step_memory, resident_tensors, training_step_tensors
from workers.probes.params import param_breakdown
from workers.probes.throughput import (
    batch1_latency_ms,
    generated_token_latency_ms,
    inference_throughput,
    kv_cache_bytes_per_token,
    share_of_budget,
)
from workers.train import (
    DivergedError,
    EpochStats,
    TrainContext,
    autocast_for,
    evaluate,
    make_context,
    seed_everything,
    train_one_epoch,
    train_step,
)
from workers.trial_config import TrialConfig
from workers.vocabulary import TrialStatus

log = logging.getLogger("workers.trial")

# Called after every epoch with the epoch's row, its κ rows, and a function that returns the trial's
# resumable state (model, optimiser, schedule, RNGs, record so far) for a checkpoint. Ray's adapter
# reports them to Tune; the state is only built if the callback asks for it.
EpochCallback = Callable[[dict, list[dict], Callable[[], dict]], None]


@dataclass
class TrialRecord:
    """What a trial returns, built up as it goes so a failure keeps everything measured before it."""

    fields: dict = field(default_factory=dict)
    epochs: list[dict] = field(default_factory=list)
    kappa: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {**self.fields, "epochs": self.epochs, "kappa": self.kappa}


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's refusal."""
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    message = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in message or "can't allocate memory" in message)


def classify_failure(exc: BaseException) -> str:
    if isinstance(exc, DivergedError):
        return TrialStatus.DIVERGED.value
    if is_out_of_memory(exc):
        return TrialStatus.OOM.value
    return TrialStatus.ERROR.value


def run_trial(
    config: dict,
    arrays: ArraySplits | None = None,
    on_epoch: EpochCallback | None = None,
    catch: bool = True,
    resume_from: dict | None = None,
    rank: Rank | None = None,
) -> dict:
    """Run one trial from a plain ``config`` dict (a :class:`TrialConfig`) and return its record.

    ``arrays``: in-memory data the caller already loaded (the sweep shares it through Ray's object
    store); None loads it here. ``catch=False`` lets exceptions propagate (for pdb). ``resume_from``:
    a state an earlier attempt handed to ``on_epoch`` (a checkpoint): training continues after that
    epoch with the same weights, optimiser, schedule and random streams. ``rank``: this process's place
    in a data-parallel trial (``workers/distributed.py``, which defines such a trial's numbers); None:
    one worker.
    """
    record = TrialRecord()
    started = time.perf_counter()
    record.fields.update(status=TrialStatus.ERROR.value, error=None, started_at=utc_now())
    if resume_from is not None:
        record.fields.update(resume_from["record"]["fields"])
        record.epochs, record.kappa = list(resume_from["record"]["epochs"]), list(resume_from["record"]["kappa"])
        started -= resume_from["loop"]["elapsed_s"]  # wall_s counts the earlier attempts' time too
    try:
        execute(TrialConfig.model_validate(config), arrays, on_epoch, record, resume_from, started, rank)
        record.fields["status"] = TrialStatus.OK.value
    except Exception as exc:
        if not catch:
            raise
        record.fields["status"] = classify_failure(exc)
        record.fields["error"] = f"{type(exc).__name__}: {exc}"
        record.fields["error_traceback"] = traceback.format_exc(limit=8)[-4000:]
        log.warning("trial failed (%s): %s", record.fields["status"], record.fields["error"])
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    record.fields["finished_at"] = utc_now()
    record.fields["wall_s"] = time.perf_counter() - started
    return record.as_dict()


def prepare_device(cfg: TrialConfig, rank: Rank | None, fields: dict) -> torch.device:
    """The trial's device (this rank's, else ``cfg.device`` resolved), threads and seeds set, and the
    run's environment recorded in ``fields``."""
    device = rank.device if rank is not None and rank.device is not None else resolve_device(cfg.device)
    if device.type == "cuda" and rank is not None:
        torch.cuda.set_device(device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    fields.update(
        seed=cfg.seed,
        device=describe_device(device),
        torch_version=torch.__version__,
        timm_version=timm.__version__,
        workers_per_trial=rank.world_size if rank is not None else 1,
    )
    seed_everything(cfg.seed, cfg.train.deterministic)
    return device


def record_model_fields(cfg: TrialConfig, spec: ModelSpec, meta: DataMeta, fields: dict) -> None:
    """The model's shape, the data set's sizes, tokenizer and library versions, and forward FLOPs."""
    fields.update(
        shape_fields(spec),
        dataset=cfg.data.name,
        data_identity=meta.identity or cfg.data.data_identity(),
        train_samples=meta.train_size,
        val_samples=meta.val_size,
    )
    if spec.seq_len is not None and transformers_version():
        fields["transformers_version"] = transformers_version()
    if getattr(meta, "tokenizer", None):
        fields["tokenizer"] = meta.tokenizer
    fields["flops_per_sample"] = forward_flops_per_sample(spec)


def total_train_steps(cfg: TrialConfig, data) -> int:
    """``train.epochs`` × steps per epoch, capped at ``train.max_steps``; raises if no batch fits."""
    steps_per_epoch = data.steps_per_epoch(cfg.train.batch_size)
    if steps_per_epoch == 0:
        raise ValueError(f"train.batch_size={cfg.train.batch_size} exceeds the {data.meta.train_size} training images")
    return min(cfg.train.epochs * steps_per_epoch, cfg.train.max_steps or 10**12)


def execute(
    cfg: TrialConfig,
    arrays: ArraySplits | None,
    on_epoch: EpochCallback | None,
    record: TrialRecord,
    resume_from: dict | None = None,
    started: float | None = None,
    rank: Rank | None = None,
):
    """The trial's body; raises on failure (``run_trial`` turns that into a record)."""
    fields = record.fields
    device = prepare_device(cfg, rank, fields)
    data = open_batches(cfg.data, device, arrays)
    spec = spec_for_data(cfg.model, data.meta)
    record_model_fields(cfg, spec, data.meta, fields)

    model = build_model(spec).to(device)
    fields.update(param_breakdown(spec, model))
    parallel = DataParallel(rank, model, data, record, cfg.train.batch_size) if rank is not None else None
    if parallel is not None:  # train on this rank's share through DDP; report merged epochs from rank 0
        data, on_epoch = parallel.data, parallel.epoch_hook(on_epoch)
    ctx = make_context(model, cfg.train, device, total_train_steps(cfg, data))
    loop = LoopState(started=started if started is not None else time.perf_counter())
    generator = torch.Generator().manual_seed(cfg.seed)
    if resume_from is not None:
        loop = restore_state(resume_from, ctx, generator, loop.started)
    train_loop(cfg, spec, ctx, data, on_epoch, record, loop, generator)
    if parallel is not None:  # what follows is rank 0's alone, on the plain model and one worker's batch
        if not parallel.finish():
            return
        cfg, data = parallel.per_worker(cfg), parallel.source
    if get_family(spec.family).modality == "masked_lm":  # pretrained: now fine-tune and score on GLUE
        fields.update(glue_fields(finetune_glue(ctx.model, data, cfg.train.finetune, cfg.train, device, cfg.seed)))
    measure_after_training(cfg, ctx, data, record)


@dataclass
class LoopState:
    """Counters of the training loop that a checkpoint must carry: each is summed over every attempt of
    the trial, so a resumed trial's record covers all of it, not only its last attempt."""

    started: float  # perf_counter at the trial's (virtual) start; not saved
    epoch: int = 0
    timed_samples: int = 0
    timed_s: float = 0.0  # steady-state window seconds (workers.train.train_one_epoch's timed_s), summed
    data_wait_s: float = 0.0  # of timed_s, seconds blocked waiting for the next batch
    compile_s: float = 0.0  # with train.compile: the compiling first step of every attempt, summed
    kappa_s: float = 0.0
    train_s: float = 0.0


def snapshot(ctx: TrainContext, generator: torch.Generator, loop: LoopState, record: TrialRecord) -> dict:
    """Everything needed to continue this trial after its epoch ``loop.epoch``, as tensors and plain data."""
    return {
        "model": ctx.model.state_dict(),
        "optimizer": ctx.optimizer.state_dict(),
        "scheduler": ctx.scheduler.state_dict(),
        "step": ctx.step,
        "generator": generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "loop": {k: v for k, v in vars(loop).items() if k != "started"}
        | {"elapsed_s": time.perf_counter() - loop.started},
        "record": {"fields": dict(record.fields), "epochs": list(record.epochs), "kappa": list(record.kappa)},
    }


def restore_state(state: dict, ctx: TrainContext, generator: torch.Generator, started: float) -> LoopState:
    ctx.model.load_state_dict(state["model"])
    ctx.optimizer.load_state_dict(state["optimizer"])
    ctx.scheduler.load_state_dict(state["scheduler"])
    ctx.step = state["step"]
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    saved = {k: v for k, v in state["loop"].items() if k != "elapsed_s"}
    log.info("resuming after epoch %d (step %d)", saved["epoch"], ctx.step)
    return LoopState(started=started, **saved)


def timed_train_epoch(
    cfg: TrialConfig, ctx: TrainContext, data, loop: LoopState, generator: torch.Generator, warmup_left: int
) -> EpochStats:
    """One epoch of training; its wall seconds, timed window, data waits and (in the epoch that compiled)
    compile seconds are added to ``loop``."""
    epoch_start = time.perf_counter()
    compiled_before = ctx.compile_s  # None until this attempt's (new process's) first compiled step
    stats: EpochStats = train_one_epoch(ctx, data.train_batches(cfg.train.batch_size, generator), warmup_left)
    loop.train_s += time.perf_counter() - epoch_start
    loop.timed_samples += stats.timed_samples
    loop.timed_s += stats.timed_s
    loop.data_wait_s += stats.data_wait_s
    if compiled_before is None and ctx.compile_s is not None:
        loop.compile_s += ctx.compile_s
    return stats


def timed_evaluate(cfg: TrialConfig, spec: ModelSpec, ctx: TrainContext, data, fields: dict) -> dict:
    """Held-out scores; the evaluation's wall seconds are added to ``fields["eval_s"]``."""
    eval_start = time.perf_counter()
    scores = evaluate(
        ctx.model, data.val_batches(cfg.train.eval_batch_size), ctx.device, cfg.train, spec.seq_len is not None
    )
    fields["eval_s"] = fields.get("eval_s", 0.0) + time.perf_counter() - eval_start
    return scores


def due_after(epoch: int, every_epochs: int, ctx: TrainContext) -> bool:
    """Whether a per-epoch measurement runs after ``epoch``: every ``every_epochs``-th epoch (0: none but
    the last), and after the last one, when the step budget is spent."""
    return ctx.step >= ctx.total_steps or (every_epochs > 0 and epoch % every_epochs == 0)


def probe_kappa_if_due(
    cfg: TrialConfig, spec: ModelSpec, ctx: TrainContext, probe_images, loop: LoopState
) -> list[dict]:
    """κ rows of every layer after the last epoch and every ``probes.kappa_every_epochs``; else none.
    The probe's wall seconds are added to ``loop.kappa_s``."""
    if not due_after(loop.epoch, cfg.probes.kappa_every_epochs, ctx):
        return []
    probe_start = time.perf_counter()
    kappa_rows = [{"epoch": loop.epoch, **row} for row in kappa_per_layer(spec, ctx.model, probe_images)]
    loop.kappa_s += time.perf_counter() - probe_start
    return kappa_rows


def update_trial_fields(
    fields: dict, scores: dict, spec: ModelSpec, ctx: TrainContext, loop: LoopState, kappa_rows: list[dict]
) -> None:
    """The trial's fields as of the epoch just run: scores, counters, timings and throughput."""
    fields.update(
        scores,
        epochs_run=loop.epoch,
        steps_run=ctx.step,
        train_s=loop.train_s,
        kappa_probe_s=loop.kappa_s,
        # workers/train.py defines both; here over every attempt (a resumed trial compiles again)
        data_wait_fraction=loop.data_wait_s / loop.timed_s if loop.timed_s > 0 else None,
        compile_s=loop.compile_s if ctx.spec.compile else None,
    )
    if kappa_rows:
        fields.update(summarise_kappa(kappa_rows))
    fields["train_samples_per_s"] = loop.timed_samples / loop.timed_s if loop.timed_s > 0 else None
    if spec.seq_len is not None and fields["train_samples_per_s"] is not None:
        fields["train_tokens_per_s"] = fields["train_samples_per_s"] * spec.seq_len


def log_epoch(epoch: int, stats: EpochStats, scores: dict, row: dict, kappa_rows: list[dict]) -> None:
    headline, value = next(iter(scores.items()), ("not evaluated", None))
    log.info(
        "epoch %d: loss %.4f  %s %s  kappa %s  lr %.2e",
        epoch,
        stats.train_loss,
        headline,
        "" if value is None else f"{value:.2f}",
        f"{row['kappa_mean']:.3g}" if kappa_rows else "-",
        stats.lr,
    )


def train_loop(
    cfg: TrialConfig,
    spec: ModelSpec,
    ctx: TrainContext,
    data,
    on_epoch,
    record: TrialRecord,
    loop: LoopState,
    generator: torch.Generator,
):
    """Epochs until the step budget is spent: train, evaluate, probe κ, report (with a resumable state).

    Training throughput's window leaves out the first ``probes.throughput_warmup_steps`` steps of each
    attempt: a resumed trial starts cold (a new process, caches and allocator empty) and warms up again.
    Held-out evaluation after every ``train.eval_every_epochs``-th epoch and the last; an epoch without one
    has no scores (its row no ``val_*`` values, the trial's fields keep the last evaluation's).
    ``eval_s``: wall seconds of the evaluations, summed over the trial (every attempt)."""
    fields = record.fields
    probe_images = data.probe_images(cfg.probes.kappa_samples)
    attempt_timed_s = 0.0  # this attempt's steady-state seconds; 0 until its warm-up is done
    while ctx.step < ctx.total_steps:
        loop.epoch += 1
        epoch = loop.epoch
        warmup_left = cfg.probes.throughput_warmup_steps if attempt_timed_s == 0 else 0
        stats = timed_train_epoch(cfg, ctx, data, loop, generator, warmup_left)
        attempt_timed_s += stats.timed_s
        due = due_after(epoch, cfg.train.eval_every_epochs, ctx)
        scores = timed_evaluate(cfg, spec, ctx, data, fields) if due else {}
        kappa_rows = probe_kappa_if_due(cfg, spec, ctx, probe_images, loop)
        row = epoch_row(epoch, stats, scores, kappa_rows, ctx.step)
        record.epochs.append(row)
        record.kappa.extend(kappa_rows)
        update_trial_fields(fields, scores, spec, ctx, loop, kappa_rows)
        log_epoch(epoch, stats, scores, row, kappa_rows)
        if on_epoch is not None:
            on_epoch(row, kappa_rows, lambda: snapshot(ctx, generator, loop, record))


def epoch_row(epoch: int, stats: EpochStats, scores: dict, kappa_rows: list[dict], step: int) -> dict:
    """The epoch's row: its held-out scores as ``val_<metric>`` (``val_top1``, ``val_accuracy``, ``val_loss``
    …, whatever the task reports), training loss, κ summary and learning rate."""
    summary = summarise_kappa(kappa_rows) if kappa_rows else {"kappa_mean": None, "kappa_max": None}
    return {
        "epoch": epoch,
        "step": step,
        "train_loss": stats.train_loss,
        **{epoch_key(name): value for name, value in scores.items()},
        "kappa_mean": summary["kappa_mean"],
        "kappa_max": summary["kappa_max"],
        "lr": stats.lr,
    }


def measure_after_training(cfg: TrialConfig, ctx: TrainContext, data, record: TrialRecord) -> None:
    """Peak memory of one more training step, inference throughput and batch-1 latency (and, for token
    sequences, throughput in tokens/s: samples/s × seq_len, the positions the model processes, padding
    included; for causal LMs, latency per generated token and the KV cache's bytes per token).

    ``peak_mem_bytes`` follows ``workers/probes/memory.py``: the step's own needs, gradients set to None
    first so the step allocates (and the probe counts) them once, resident data left out.
    ``resident_data_bytes``: the bytes of the distinct tensor storages the batch source holds on the trial's
    device (``resident_tensors``: whole splits kept there, cached masks and probe batches); 0 for a loader
    that holds none.

    Time bound: these probes together may spend ``probes.probe_time_fraction`` × ``train_s`` (None: no
    bound). The memory step is one step whatever it costs; each later probe gets an even share of what is
    left (``share_of_budget``) and runs as many passes as fit in it, at least one timed (throughput) or two
    (latencies; ``workers/probes/throughput.py``). ``end_probes_s``: wall seconds of this whole function."""
    fields = record.fields
    started = time.perf_counter()
    fraction = cfg.probes.probe_time_fraction
    total_s = fraction * (fields.get("train_s") or 0.0) if fraction is not None else None
    generator = torch.Generator().manual_seed(cfg.seed + 1)
    inputs, labels = next(iter(data.train_batches(cfg.train.batch_size, generator)))
    resident = resident_tensors(data)
    fields["resident_data_bytes"] = live_storage_bytes(resident, ctx.device)
    if cfg.probes.memory:
        ctx.optimizer.zero_grad(set_to_none=True)
        held = training_step_tensors(ctx.model, ctx.optimizer, [*tensors(inputs), labels])
        peak, method = peak_train_step_memory(lambda: train_step(ctx, inputs, labels), ctx.device, held, resident)
        fields.update(peak_mem_bytes=peak, peak_mem_method=method, peak_mem_batch_size=cfg.train.batch_size)
    eval_inputs = next(iter(data.val_batches(cfg.train.eval_batch_size)))[0]
    autocast = lambda: autocast_for(ctx.device, cfg.train)  # noqa: E731
    generates = hasattr(ctx.model, "generate")  # causal LMs: latency per generated token, batch 1
    probes = 3 if generates else 2  # timed probes below, each budgeted when it starts
    budget_s = lambda left: share_of_budget(total_s, time.perf_counter() - started, left)  # noqa: E731
    warmup = cfg.probes.throughput_warmup_steps
    fields["infer_samples_per_s"] = inference_throughput(
        ctx.model, eval_inputs, warmup, cfg.probes.throughput_steps, autocast, budget_s(probes)
    )
    fields["infer_batch_size"] = batch_size(eval_inputs)
    fields["latency_b1_ms"] = batch1_latency_ms(
        ctx.model, head(eval_inputs, 1), warmup, cfg.probes.latency_iters, autocast, budget_s(probes - 1)
    )
    seq_len = tokens_per_sample(eval_inputs)
    if seq_len is not None:
        fields["infer_tokens_per_s"] = fields["infer_samples_per_s"] * seq_len
    if generates:
        fields["token_latency_ms"] = generated_token_latency_ms(
            ctx.model, head(eval_inputs, 1)["input_ids"], warmup, cfg.probes.latency_iters, autocast, budget_s(1)
        )
        fields["kv_cache_bytes_per_token"] = kv_cache_bytes_per_token(cfg.model, ctx.model, autocast)
    fields["end_probes_s"] = time.perf_counter() - started


def spec_for_data(spec: ModelSpec, meta: DataMeta) -> ModelSpec:
    """The model spec with its input shape and classes taken from the data (validated again): image size
    and channels, or sequence length and vocabulary for token sequences."""
    if getattr(meta, "seq_len", None) is not None:
        from_data = {"seq_len": meta.seq_len, "vocab_size": meta.vocab_size}
    else:
        from_data = {"img_size": meta.img_size, "in_chans": meta.in_chans}
    return ModelSpec.model_validate({**spec.model_dump(), **from_data, "num_classes": meta.num_classes})


def shape_fields(spec: ModelSpec) -> dict:
    return {
        "family": spec.family,
        "depth": spec.depth,
        "num_heads": spec.num_heads,
        "num_kv_heads": spec.resolved_num_kv_heads,  # = num_heads for multi-head attention
        "head_dim": spec.resolved_head_dim,
        "embed_dim": spec.embed_dim,
        "mlp_dim": spec.mlp_dim,
        "attn_dim": spec.attn_dim,
        "patch_size": spec.patch_size,
        "img_size": spec.img_size,
        "num_tokens": num_tokens(spec),
        "num_classes": spec.num_classes,
        "seq_len": spec.seq_len,
    }


def transformers_version() -> str | None:
    """The installed transformers' version, read from its metadata (importing it costs seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return None


# --- command line -----------------------------------------------------------------------------------------


class ConfigFileError(ValueError):
    """A trial config file that cannot be read as JSON or YAML; the message says where and why."""


def load_config_file(path: Path) -> dict:
    """The trial config in ``path`` (YAML for .yaml/.yml, else JSON), or :class:`ConfigFileError`."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except OSError as exc:
        raise ConfigFileError(f"cannot read the trial config {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigFileError(
            f"the trial config {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from exc
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "YAML" if path.suffix in (".yaml", ".yml") else "JSON"
        raise ConfigFileError(f"the trial config {path} is not valid {kind}: {' '.join(str(exc).split())}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trial", description="Run one trial without Ray and print its record.")
    parser.add_argument("config", type=Path, help="trial config (JSON or YAML): model, data, train, probes, seed")
    parser.add_argument("--out", type=Path, help="also write the record as JSON here")
    parser.add_argument("--pdb", action="store_true", help="let exceptions through and open pdb at the failure")
    parser.add_argument("--quiet", action="store_true", help="no per-epoch progress on stderr")
    parser.add_argument("--data-workers", type=int, help="DataLoader workers (sets data.num_workers)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        config = load_config_file(args.config)
    except ConfigFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.data_workers is not None:  # a machine setting: the config's identity does not change
        config = {**config, "data": {**config.get("data", {}), "num_workers": args.data_workers}}
    if args.pdb:
        import pdb

        try:
            record = run_trial(config, catch=False)
        except Exception:
            pdb.post_mortem()
            return 1
    else:
        record = run_trial(config)
    text = json.dumps(record, indent=2, default=str)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if record["status"] == TrialStatus.OK else 1


if __name__ == "__main__":
    sys.exit(main())
