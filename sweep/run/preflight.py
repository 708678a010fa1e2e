"""``sweep preflight``: before any GPU hour, check on this CPU machine that every config of a plan can run.

One row per check, each ``ok`` or the problem in one line:

- ``data``: the data set is where trials will look (``check_data``) and its own loading works on a tiny slice
  (``limit_train`` / ``limit_val`` = ``TINY_BATCH``, one training batch read). With ``stand_in`` (``sweep
  preflight --stand-in-data``: the data lives on the cluster, not here), data that is not here is no problem:
  the row says what was not found, and the configs run on stand-in batches of the data's shapes
  (``workers/data/stand_in.py``);
- ``results``: the results destination (folder or ``s3://`` / ``gs://`` prefix) takes a probe object, which is
  written and deleted again;
- ``data on nodes`` (with ``RAY_ADDRESS``, and no stated node): the data check run as a Ray task on each live
  node that can hold a trial, so data missing on one worker node shows before the sweep;
- ``resources``: a trial's CPUs and GPUs fit one node of the cluster it will run on (a node stated with
  ``--node-gpus`` / ``--node-cpus``; else ``RAY_ADDRESS``: Ray's live nodes; else this machine), per worker when
  ``workers_per_trial`` > 1;
- one row per distinct config: the worker's own trial (``workers.trial.run_trial``: data, model build, the
  training loop, evaluation, κ, memory and throughput probes, GLUE fine-tuning for masked LMs) for ONE
  training step at batch ``TINY_BATCH`` on CPU, under ``torch.autocast("cpu", dtype=torch.bfloat16)`` when the
  space asks for bf16 (the dtype path a GPU trial takes: ``workers.train.autocast_for`` autocasts on CUDA
  only), and through ``torch.compile`` with ``compile=True``.

A config too big to run here in seconds (training bytes, 16 per parameter: fp32 weights, gradients and AdamW's
two moments, over half the available memory; or a step over ``FULL_STEP_FLOPS_MAX``) is built on the meta
device, where its parameter count is checked against the plan's, and its step runs on a copy with one block per
stage (same heads, head size, widths and data): a dtype or shape error of a block shows in one block, while
memory does not, and the row says which was checked.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sweep.results.storage import is_remote
from sweep.text import duration_words, size_words

TINY_BATCH = 2  # samples per training step, evaluation batch and probe batch
TRAINING_BYTES_PER_PARAM = 16  # fp32 weights, gradients and AdamW's two moments
FULL_STEP_FLOPS_MAX = 2e10  # forward + backward FLOPs of the tiny step above which a one-block copy runs instead:
# about a second on 2 CPU cores in bf16; a ViT-B/16 at 224 px (1e11) and anything larger run one block per stage


@dataclass
class Row:
    """One line of the preflight table: what was checked (``config_id``: a config id, or ``data`` …), the
    config's shape in words, ``problem`` (None: ok) and ``checked`` (how, in a few words)."""

    config_id: str
    shape: str
    problem: str | None
    checked: str
    wall_s: float = 0.0
    note: str | None = None  # said in the result column of a row that passed (data checked elsewhere)
    est_peak_mem_bytes: int | None = None  # sweep/plan/estimate.py's peak of a training step on the GPU
    est_train_s: float | None = None  # and one trial's training time there (None: no --gpu, or unknown samples)

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def result(self) -> str:
        return self.problem or self.note or "ok"


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


# --- data ------------------------------------------------------------------------------------------------


def tiny_data(data):
    """The data spec cut to ``TINY_BATCH`` training and held-out samples (``DataSetSpec.tiny_copy``: its own
    loader reads only those, and a generated set generates no more)."""
    return data.tiny_copy(TINY_BATCH)


def check_data_row(space, space_ref: str, stand_in: bool = False) -> tuple[Row, object]:
    """(the row, what the configs' trials read): the data set is reachable and its loader yields one tiny
    training batch (None: trials open it themselves); with ``stand_in``, data that is not here gives a row
    that says so and ``workers.data.stand_in.StandInData`` of ``TINY_BATCH`` samples for the trials."""
    import torch

    from sweep.space.validation import check_data
    from workers.data.registry import open_batches
    from workers.data.stand_in import StandInData

    started = time.perf_counter()
    try:
        check_data(space, space_ref)
        source = open_batches(tiny_data(space.data), torch.device("cpu"))
        next(iter(source.train_batches(TINY_BATCH, torch.Generator().manual_seed(0))))
    except Exception as exc:
        wall_s = time.perf_counter() - started
        if not stand_in:
            return Row("data", space.data.name, first_line(exc), "found and loaded", wall_s), None
        note = f"not here, so configs ran on stand-in batches; check it where trials run: {first_line(exc)}"
        return Row("data", space.data.name, None, "looked for here", wall_s, note=note), StandInData(
            space.data, TINY_BATCH
        )
    return Row(
        "data", space.data.name, None, f"found; {TINY_BATCH} samples loaded", time.perf_counter() - started
    ), None


# --- results destination ---------------------------------------------------------------------------------


def check_results_row(results) -> Row:
    """A probe object written to the results destination and deleted again."""
    name = f".preflight-{uuid.uuid4().hex}"
    try:
        if is_remote(results):
            path = results.path(name)
            results.put(path, b"preflight")
            results.delete(path)
        else:
            folder = Path(results)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(b"preflight")
            (folder / name).unlink()
    except Exception as exc:
        return Row("results", str(results), f"cannot write to {results}: {first_line(exc)}", "write + delete")
    return Row("results", str(results), None, "probe object written and deleted")


# --- resources -------------------------------------------------------------------------------------------


def stated_node(gpus: float, cpus: float) -> tuple[str, list[dict[str, float]]]:
    """A node of the cluster the trials will run on, as its user states it (``--node-gpus`` / ``--node-cpus``)."""
    return f"the stated node ({gpus:g} GPU, {cpus:g} CPU)", [{"CPU": float(cpus), "GPU": float(gpus)}]


def cluster_nodes() -> tuple[str, list[dict[str, float]]]:
    """(where, the CPUs and GPUs of each node): Ray's live nodes at ``RAY_ADDRESS``, else this machine."""
    address = os.environ.get("RAY_ADDRESS")
    if address:
        import ray

        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        return f"the Ray cluster at {address}", [{"CPU": n.get("CPU", 0.0), "GPU": n.get("GPU", 0.0)} for n in nodes]
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return "this machine", [{"CPU": float(os.cpu_count() or 1), "GPU": float(gpus)}]


def resource_problem(resources, where: str, nodes: list[dict[str, float]]) -> str | None:
    """Why a trial (each of its workers, with ``workers_per_trial`` > 1) fits on no node, or None."""
    workers = resources.workers_per_trial
    cpus, gpus = resources.cpus_per_trial / workers, resources.gpus_per_trial / workers
    unit = "each of its workers" if workers > 1 else "a trial"
    most_cpus = max((n.get("CPU", 0.0) for n in nodes), default=0.0)
    most_gpus = max((n.get("GPU", 0.0) for n in nodes), default=0.0)
    if gpus > most_gpus:
        return (
            f"{unit} needs {gpus:g} GPUs (resources.gpus_per_trial={resources.gpus_per_trial:g}) but no node of "
            f"{where} has more than {most_gpus:g}; lower gpus_per_trial or run where a node has {gpus:g}"
        )
    if cpus > most_cpus:
        return (
            f"{unit} needs {cpus:g} CPUs (resources.cpus_per_trial={resources.cpus_per_trial:g}) but no node of "
            f"{where} has more than {most_cpus:g}; lower cpus_per_trial"
        )
    return None


def check_resources_row(resources, nodes: tuple[str, list[dict[str, float]]] | None = None) -> Row:
    where, listed = nodes if nodes is not None else cluster_nodes()
    wanted = f"{resources.cpus_per_trial:g} CPU, {resources.gpus_per_trial:g} GPU per trial"
    problem = resource_problem(resources, where, listed)
    return Row("resources", wanted, problem, f"against {len(listed)} node(s) of {where}")


def data_found_here(space, space_ref: str) -> str | None:
    """Run on a cluster node: None when the data set is where a trial there looks, else why not (one line)."""
    from sweep.space.validation import check_data

    try:
        check_data(space, space_ref)
    except Exception as exc:
        return first_line(exc)
    return None


def check_data_on_nodes_row(space, space_ref: str, address: str) -> Row:
    """The data check (``check_data``: found where trials look, nothing read) as a Ray task pinned to each live
    node of the cluster at ``address`` that can hold a trial, using no CPU so that a busy node answers too."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started = time.perf_counter()
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    resources = space.resources
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    able = [n for n in nodes if resource_problem(resources, address, [n["Resources"]]) is None]
    check = ray.remote(num_cpus=0)(data_found_here)
    pending = [
        check.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            space, space_ref
        )
        for n in able
    ]
    answers = ray.get(pending, timeout=600)
    missing = [(n["NodeManagerAddress"], why) for n, why in zip(able, answers, strict=True) if why is not None]
    checked = f"on each of the {len(able)} node(s) of {address} that can hold a trial"
    wall_s = time.perf_counter() - started
    if missing:
        where = ", ".join(ip for ip, _ in missing)
        return Row("data on nodes", space.data.name, f"not on {len(missing)} of {len(able)} nodes ({where}): "
                   f"{missing[0][1]}", checked, wall_s)  # fmt: skip
    return Row("data on nodes", space.data.name, None, f"found {checked}", wall_s)


# --- configs ---------------------------------------------------------------------------------------------


def available_memory_bytes() -> int:
    """Memory the OS could give this process now (``MemAvailable``; else physical memory)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def runs_full_size(config, available_bytes: int) -> bool:
    """Whether the config's own step runs here: its training bytes within half of ``available_bytes`` and
    its tiny step's FLOPs (3 × forward, × ``TINY_BATCH``) within ``FULL_STEP_FLOPS_MAX``."""
    fits = config.params * TRAINING_BYTES_PER_PARAM <= available_bytes / 2
    return fits and 3 * config.flops_per_sample * TINY_BATCH <= FULL_STEP_FLOPS_MAX


def shrunk_model(model: dict) -> dict:
    """The model with one block (per stage, for staged families): heads, head size and widths unchanged."""
    shrunk = {**model, "depth": 1}
    if model.get("stage_depths"):
        shrunk["stage_depths"] = [1] * len(model["stage_depths"])
    return shrunk


def meta_params(model: dict) -> int:
    """Parameters of the full-size model built on the meta device (no memory for weights)."""
    import torch

    from workers.config import ModelSpec
    from workers.models import build_model

    with torch.device("meta"):
        built = build_model(ModelSpec.model_validate(model))
    return sum(p.numel() for p in built.parameters())


def tiny_trial_config(space, model: dict, compile_: bool) -> dict:
    """The worker's trial config for one step at ``TINY_BATCH`` on CPU, every probe at its smallest."""
    from sweep.plan.plan import worker_config

    config = worker_config(space, model, seed=0)
    train = {**config["train"], "epochs": 1, "max_steps": 1, "batch_size": TINY_BATCH}
    train.update(eval_batch_size=TINY_BATCH, warmup_steps=0, compile=compile_)
    if train.get("finetune"):
        train["finetune"] = {**train["finetune"], "epochs": 1, "max_steps": 1, "batch_size": TINY_BATCH}
        train["finetune"]["eval_batch_size"] = TINY_BATCH
    # κ on one sample: its SVD per block is the costliest probe (2.6 s a sample at LRA's 2,000 tokens)
    probes = {**config["probes"], "kappa_samples": 1, "throughput_warmup_steps": 0}
    probes.update(throughput_steps=1, latency_iters=2, probe_time_fraction=None)
    data = tiny_data(space.data).model_dump()
    return {**config, "data": data, "train": train, "probes": probes, "device": "cpu"}


def run_tiny_trial(trial_config: dict, bf16: bool, data=None) -> str | None:
    """The worker's trial on ``trial_config`` under CPU bf16 autocast when ``bf16``, reading ``data`` (stand-in
    batches) when given; its error, or None."""
    from contextlib import nullcontext

    import torch

    from workers.trial import run_trial

    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext()
    threads = torch.get_num_threads()
    try:
        with autocast:
            record = run_trial(trial_config, arrays=data)
    finally:
        torch.set_num_threads(threads)  # the trial sets the space's threads per trial
    if record["status"] != "ok":
        return (record.get("error") or record["status"]).strip().splitlines()[0]
    return None


def shape_words(config) -> str:
    """``vit d4 h8×32 D256``, with ``kv2`` for grouped-query attention, the MLP width where it is not 4 × D,
    and the intervention where there is one, so that no two configs of a plan read the same."""
    s = config.shape
    words = [s.family, f"d{s.depth}", f"h{s.num_heads}×{s.head_dim}", f"D{s.embed_dim}"]
    words += [f"kv{s.num_kv_heads}"] if s.num_kv_heads not in (None, s.num_heads) else []
    words += [f"mlp{s.mlp_dim}"] if s.mlp_dim != 4 * s.embed_dim else []
    words += [s.conditioning] if s.conditioning != "none" else []
    return " ".join(words)


def check_config(space, config, compile_: bool, available_bytes: int, done: dict, data=None) -> Row:
    """One config's row; ``done`` maps a shrunk model already run to its outcome (copies repeat across
    depths); ``data``: stand-in batches for data that is not here."""
    started = time.perf_counter()
    bf16 = space.train.amp_bf16
    how = ("bf16 autocast" if bf16 else "fp32") + (", compiled" if compile_ else "")
    model = config.model
    how += ", stand-in data" if data is not None else ""
    checked = f"1 step + probes, batch {TINY_BATCH}, {how}"
    problem = None
    if not runs_full_size(config, available_bytes):
        try:
            built = meta_params(model)
        except Exception as exc:
            return Row(config.config_id, shape_words(config), f"meta build: {first_line(exc)}", "meta build")
        if built != config.params:
            problem = f"meta build has {built:,} parameters, the plan {config.params:,}"
        model = shrunk_model(model)
        checked = f"meta build + params; 1 step + probes on a 1-block copy, batch {TINY_BATCH}, {how}"
    key = repr(sorted(model.items()))
    if problem is None:
        if key not in done:
            try:
                done[key] = run_tiny_trial(tiny_trial_config(space, model, compile_), bf16, data)
            except Exception as exc:  # a config the worker refuses before its trial starts
                done[key] = first_line(exc)
        problem = done[key]
    return Row(config.config_id, shape_words(config), problem, checked, time.perf_counter() - started)


# --- the whole preflight ---------------------------------------------------------------------------------


def with_estimate(row: Row, estimate: dict | None, gpu_name: str | None) -> Row:
    """``row`` with the config's estimated peak memory and training time (``sweep plan --gpu``'s figures); a
    config predicted not to fit the GPU is a problem, said before the hours are spent."""
    if not estimate:
        return row
    row.est_peak_mem_bytes, row.est_train_s = estimate["est_peak_mem_bytes"], estimate["est_train_s"]
    if row.ok and not estimate["fits"]:
        row.problem = f"estimated peak {size_words(estimate['est_peak_mem_bytes'])} does not fit {gpu_name}"
    return row


def preflight(
    plan,
    space_ref: str,
    results,
    compile_: bool = False,
    nodes=None,
    log=None,
    estimates=None,
    gpu_name=None,
    stand_in: bool = False,
) -> list[Row]:
    """Every check of the module docstring on ``plan``, a line on ``log`` as each finishes; ``nodes``: (where,
    node resources) to check against instead of :func:`cluster_nodes`; ``estimates`` (by config id, from
    ``sweep/cli/estimates.py``'s ``estimate_rows``) add each config's memory and time on ``gpu_name``;
    ``stand_in``: data that is not here is checked where trials run, and configs run on stand-in batches."""
    estimates = estimates or {}
    rows: list[Row] = []
    log = log or sys.stderr

    address = os.environ.get("RAY_ADDRESS") if nodes is None else None
    total = len(plan.configs) + 3 + bool(address)

    def add(row: Row) -> None:
        rows.append(row)
        state = row.result if row.ok else f"PROBLEM: {row.problem}"
        print(f"[preflight] {len(rows)}/{total} {row.config_id} ({row.wall_s:.1f}s): {state}", file=log)

    add(check_results_row(results))
    add(check_resources_row(plan.space.resources, nodes))
    if address and rows[-1].ok:  # where trials will run: each node that can hold one
        add(check_data_on_nodes_row(plan.space, space_ref, address))
    data_row, data = check_data_row(plan.space, space_ref, stand_in)
    add(data_row)
    available = available_memory_bytes()
    done: dict = {}
    for config in plan.configs:
        estimate = estimates.get(config.config_id)
        if not data_row.ok:
            row = Row(config.config_id, shape_words(config), "not run: the data check failed", "-")
        else:
            row = check_config(plan.space, config, compile_, available, done, data)
        add(with_estimate(row, estimate, gpu_name))
    return rows


def estimate_words(row: Row) -> tuple[str, str]:
    """The estimate columns' cells: peak memory and training time per trial, each in the unit that reads best
    (sweep/text.py; '' where not estimated)."""
    memory = "" if row.est_peak_mem_bytes is None else size_words(row.est_peak_mem_bytes)
    return memory, "" if row.est_train_s is None else duration_words(row.est_train_s)


def format_rows(rows: list[Row]) -> str:
    """The table: one line per row, what was checked and how, the estimated memory and time (with ``--gpu``),
    then ``ok`` or the problem."""
    estimated = any(r.est_peak_mem_bytes is not None for r in rows)
    header = ("check", "shape", "checked", *(("est. memory", "est. time") if estimated else ()), "result")
    lines = [(r.config_id, r.shape, r.checked, *(estimate_words(r) if estimated else ()), r.result) for r in rows]
    last = len(header) - 1
    widths = [max(len(str(line[i])) for line in [header, *lines]) for i in range(last)]
    return "\n".join(
        "  ".join([*(str(line[i]).ljust(widths[i]) for i in range(last)), str(line[last])]) for line in [header, *lines]
    )
