"""The results tables' schemas (Arrow), one place for every column, its type and unit.

Layout under the results folder (one glob per table for DuckDB):

    results/trials/<space>/<sweep_id>/<trial_id>.parquet   one row per trial
    results/epochs/<space>/<sweep_id>/<trial_id>.parquet   one row per trial and epoch
    results/kappa/<space>/<sweep_id>/<trial_id>.parquet    one row per trial, epoch and attention layer
    results/spaces/<space>/<sweep_id>.parquet              one row per sweep: the space's analysis settings

When a sweep ends, its per-trial files are merged into one per table,
``<table>/<space>/<sweep_id>/compacted-<id>.parquet`` (``sweep/results/compact.py``); the columns are the same.

Every row carries ``schema_version``; a change that renames or retypes a column bumps it.

Version 2 made the analysis metric-agnostic: a trials row names its space's headline metric (``metric``,
its direction ``metric_mode``) and carries its value (``score``); sequence trials add ``accuracy``,
tokens/s and ``seq_len``; epochs rows add ``val_accuracy`` and ``val_score``; a spaces row holds
``metric``, ``metric_mode`` and ``tolerance`` instead of ``tolerance_top1``. Version-1 files stay
readable: ``sweep/results/compat.sql`` reads a v1 trials row as metric ``top1``, mode ``max``, score = top1, and
a v1 spaces row's ``tolerance_top1`` as its tolerance.
"""

from __future__ import annotations

import pyarrow as pa

from sweep.questions import declared_axes, declared_labels
from workers.data.glue import GLUE_TASKS
from workers.metrics import METRICS, epoch_key, epoch_metrics

SCHEMA_VERSION = 2


def metric_columns() -> list[tuple[str, pa.DataType]]:
    """A trials column per metric (``workers/metrics.py``), in its definition's order."""
    return [(name, pa.float64()) for name in METRICS]


def epoch_metric_columns() -> list[tuple[str, pa.DataType]]:
    """An epochs column ``val_<metric>`` per metric scored after every evaluation."""
    return [(epoch_key(name), pa.float64()) for name in epoch_metrics()]


GLUE_TASK_NAMES = tuple(GLUE_TASKS)  # each GLUE task has a score column in trials
TABLES = ("trials", "epochs", "kappa")


# Arrow's type of each column type a question may declare (sweep/questions/base.py COLUMN_TYPES, DuckDB's words).
ARROW_TYPES = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64()}


def label_columns() -> list[tuple[str, pa.DataType]]:
    """A trials column per question label (``Question.labels``), in registry order, of its declared type."""
    return [(label.name, ARROW_TYPES[label.sql_type]) for label in declared_labels()]


def axis_columns() -> list[tuple[str, pa.DataType]]:
    """A trials column per question axis (``Question.axes``), in registry order, of its declared type."""
    return [(axis.name, ARROW_TYPES[axis.sql_type]) for axis in declared_axes()]


def trials_schema() -> pa.Schema:
    """The trials table's columns: the metrics' from their definitions, the questions' labels from their
    declarations (read when called)."""
    return pa.schema([
        ("schema_version", pa.int32()),
        ("space", pa.string()),
        ("profile", pa.string()),
        ("sweep_id", pa.string()),
        ("trial_id", pa.string()),
        ("config_id", pa.string()),
        ("seed", pa.int64()),
        ("is_baseline", pa.bool_()),
        ("family", pa.string()),
        ("depth", pa.int64()),
        ("num_heads", pa.int64()),
        ("head_dim", pa.int64()),
        ("embed_dim", pa.int64()),
        ("mlp_dim", pa.int64()),
        ("attn_dim", pa.int64()),
        ("head_dim_rule", pa.string()),
        # each question's axes (sweep/questions/: its Question.axes states each one's definition), in registry
        # order (gqa's key/value heads, then conditioning)
        *axis_columns(),
        # each question's label columns, in registry order (sweep/questions/): its Question.labels
        # states each one's definition; NULL for a config without the label and in rows from before it existed
        *label_columns(),
        ("status", pa.string()),  # ok | diverged | oom | error | pruned
        ("error", pa.string()),
        ("error_traceback", pa.string()),  # a failed trial's Python traceback (the message is `error`)
        ("metric", pa.string()),  # the space's headline metric: top1, accuracy, val_loss, ... (workers/metrics.py)
        ("metric_mode", pa.string()),  # max (higher is better) | min
        ("score", pa.float64()),  # the headline metric's value, in its own units: what the analysis judges
        # the headline metric's value for a model that learned nothing on this data set, in the same units
        # (uniform guessing: 100 / classes percent, ln(classes) nats; MQAR: the in-context guess, 100 / pairs);
        # NULL where the metric has no single chance level (glue_avg) or for rows written before it was recorded
        ("chance_score", pa.float64()),
        # each metric a trial reports (workers/metrics.py: top1, top5, accuracy, val_loss, perplexity, glue_avg),
        # in its own unit; glue_avg is the mean of the GLUE task scores below that the trial ran
        *metric_columns(),
        # Each GLUE task's dev score in points (percent) with its metric: MCC (cola), F1 (mrpc, qqp), Spearman
        # (stsb), accuracy (the rest; mnli: matched, mnli_mm: mismatched dev set); synthetic: the generated task.
        *((f"glue_{task}", pa.float64()) for task in GLUE_TASK_NAMES),
        ("finetune_s", pa.float64()),  # masked LMs: wall seconds of GLUE fine-tuning, all tasks
        ("params", pa.int64()),
        ("params_attention", pa.int64()),
        ("params_mlp", pa.int64()),
        ("params_embed_head", pa.int64()),
        ("flops_per_sample", pa.int64()),  # forward FLOPs (2 per multiply-add) per image
        ("peak_mem_bytes", pa.int64()),
        ("peak_mem_method", pa.string()),
        ("peak_mem_batch_size", pa.int64()),  # the training batch peak_mem_bytes was measured at (per worker)
        ("train_samples_per_s", pa.float64()),
        ("infer_samples_per_s", pa.float64()),
        ("infer_batch_size", pa.int64()),  # the batch inference throughput was timed at
        ("train_tokens_per_s", pa.float64()),  # sequence trials: tokens per second, steady-state training
        ("infer_tokens_per_s", pa.float64()),  # sequence trials: tokens per second, eval-mode batches
        ("latency_b1_ms", pa.float64()),  # one forward pass of one sample (a whole window for sequences)
        ("token_latency_ms", pa.float64()),  # causal LMs: per generated token, batch 1, KV cache, prefill excluded
        # causal LMs: bytes the KV cache holds per token of context, all layers: 2 (K and V) · depth · num_kv_heads ·
        # head_dim · bytes per element of the cache's dtype (what K and V are computed in: bf16 under CUDA autocast,
        # else the model's parameter dtype)
        ("kv_cache_bytes_per_token", pa.int64()),
        ("kappa_mean", pa.float64()),
        ("kappa_max", pa.float64()),
        ("epochs_run", pa.int32()),
        ("steps_run", pa.int64()),
        ("restarts", pa.int32()),
        ("wall_s", pa.float64()),
        ("train_s", pa.float64()),
        ("kappa_probe_s", pa.float64()),
        ("eval_s", pa.float64()),  # wall seconds of held-out evaluation, summed over the trial's attempts
        ("end_probes_s", pa.float64()),  # wall seconds of the end-of-trial probes (memory, inference, latencies)
        # Share of steady-state training time blocked waiting for the next batch: seconds inside next() on the
        # batch iterator ÷ wall seconds of the throughput window (the same window as train_samples_per_s), over
        # every attempt's epochs (workers/train.py train_one_epoch). Near 0: data ready in time; 0.2 or more:
        # the loader holds the model back (more --data-workers or cpus_per_trial). On CUDA an upper bound.
        ("data_wait_fraction", pa.float64()),
        ("compile_s", pa.float64()),  # train.compile: wall seconds of the first (compiling) step, summed over attempts
        ("dataset", pa.string()),
        # what the trial read: hub:<repo>[/<config>]@<revision>, folder:<root>#<hash of its files' paths and sizes>,
        # generated:<name> (its options are in the config id) or embedded:<what>
        ("data_identity", pa.string()),
        ("train_samples", pa.int64()),  # the training split's samples (images, sequences or windows), after limit_train
        ("val_samples", pa.int64()),  # held-out samples each evaluation scored (the eval split, after limit_val)
        ("seq_len", pa.int64()),  # sequence trials: tokens per sample the model sees
        ("img_size", pa.int64()),  # image trials: the side the model sees, in pixels
        ("patch_size", pa.int64()),  # image trials: the patch side, in pixels
        ("num_tokens", pa.int64()),  # tokens each attention layer sees per sample (patches and class token, or seq_len)
        ("num_classes", pa.int64()),  # classes of the model's head (the vocabulary for language models)
        ("tokenizer", pa.string()),  # language models: the tokenizer file read, or the one trained locally
        ("device", pa.string()),
        ("torch_version", pa.string()),
        ("timm_version", pa.string()),
        ("transformers_version", pa.string()),  # sequence and language families (HF transformers)
        ("node_id", pa.string()),  # the Ray node that ran the trial (its last attempt)
        ("git_sha", pa.string()),
        ("started_at", pa.timestamp("ms", tz="UTC")),
        ("finished_at", pa.timestamp("ms", tz="UTC")),
        ("trial_config", pa.string()),  # the worker config as JSON: enough to rerun the trial by hand
        # data tensors the batch source keeps on the device (not in peak_mem_bytes)
        ("resident_data_bytes", pa.int64()),
        # Workers that trained the trial data-parallel (1: one process). With N > 1 train_samples_per_s is summed
        # over them, peak_mem_bytes is one worker's (batch_size / N), scores and κ rank 0's (workers/distributed.py).
        ("workers_per_trial", pa.int32()),
        # What the trial held and for how long (the budget of `--max-gpu-hours` sums device_s). devices_held: the
        # GPUs its resources reserved (resources.gpus_per_trial, fractions kept), or its CPUs (cpus_per_trial) when it
        # reserved no GPU. device_s = wall seconds × devices_held: GPU-seconds for a GPU trial, CPU-seconds for a CPU
        # one. The wall seconds are the record's wall_s (every attempt's, from the worker) when the trial reported
        # its record, else the driver's from the trial's first start to its row being written (a trial stopped
        # early or lost). NULL in rows written before it was recorded.
        ("devices_held", pa.float64()),
        ("device_s", pa.float64()),
    ])  # fmt: skip


TRIALS = trials_schema()

# The columns that tie an epochs or kappa row to its trial.
TRIAL_KEY = [
    ("schema_version", pa.int32()),
    ("space", pa.string()),
    ("sweep_id", pa.string()),
    ("trial_id", pa.string()),
    ("config_id", pa.string()),
    ("seed", pa.int64()),
]


def epochs_schema() -> pa.Schema:
    """The epochs table's columns, the per-epoch metrics' from their definitions (read when called)."""
    return pa.schema([
        *TRIAL_KEY,
        ("epoch", pa.int32()),
        ("step", pa.int64()),
        ("train_loss", pa.float64()),
        # the trial's headline metric after this epoch (its trials row's `metric`); NULL (as every val_*) after
        # an epoch without evaluation (train.eval_every_epochs)
        ("val_score", pa.float64()),
        *epoch_metric_columns(),  # val_<metric> of each metric scored after every evaluation (workers/metrics.py)
        ("kappa_mean", pa.float64()),
        ("kappa_max", pa.float64()),
        ("lr", pa.float64()),
    ])  # fmt: skip


EPOCHS = epochs_schema()

KAPPA = pa.schema([
    *TRIAL_KEY,
    ("epoch", pa.int32()),
    ("layer", pa.int32()),
    ("layer_name", pa.string()),
    ("attention", pa.string()),  # the kind of attention: self, xca, inner, outer, window, channel, outlook
    ("kappa", pa.float64()),  # median over probe images
    ("kappa_max", pa.float64()),  # max over probe images
])  # fmt: skip

# One row per sweep started (or import): the space's settings that the analysis needs.
SPACES = pa.schema([
    ("schema_version", pa.int32()),
    ("space", pa.string()),
    ("sweep_id", pa.string()),
    ("profile", pa.string()),
    ("question", pa.string()),
    ("metric", pa.string()),  # the headline metric the space is judged on
    ("metric_mode", pa.string()),  # max | min
    ("tolerance", pa.float64()),  # in the metric's units; NULL: the analysis default (0.5)
    ("questions", pa.string()),  # JSON {question: what it records} (Question.record); NULL: an import, or older
    # JSON: the space's `search:` as validated ({"kind": "grid"}, optuna's or edge's settings); an edge search's
    # adds "lattice", the plan's configs (sweep/results/sink.py search_json). NULL: an import, or older
    ("search", pa.string()),
    ("written_at", pa.timestamp("ms", tz="UTC")),
])  # fmt: skip

SCHEMAS = {"trials": TRIALS, "epochs": EPOCHS, "kappa": KAPPA, "spaces": SPACES}


def current_schema(table: str) -> pa.Schema:
    """``table``'s schema built now: the metrics' columns from their definitions as they stand."""
    return {"trials": trials_schema, "epochs": epochs_schema}.get(table, lambda: SCHEMAS[table])()


ALL_TABLES = (*TABLES, "spaces")


def table_from_rows(table: str, rows: list[dict]) -> pa.Table:
    """Rows (dicts) to an Arrow table of the table's schema; missing columns are null, extra keys
    are dropped."""
    schema = current_schema(table)  # as declared now: a question's label columns are read when called
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    return pa.Table.from_pydict(columns, schema=schema)
