"""The columns each of the report's shared tables shows, and the sentence on what the trials cost (a cell and a
table: ``sweep/markdown.py``)."""

from __future__ import annotations

FRONT_COLUMNS = ["depth", "num_heads", "head_dim", "score_mean", "score_se", "params", "train_samples_per_s",
                 "infer_samples_per_s", "peak_mem_bytes"]  # fmt: skip


KAPPA_COLUMNS = ["depth", "num_heads", "head_dim", "attn_dim", "kappa_median", "score_mean"]


VERDICT_COLUMNS = ["depth", "num_heads", "head_dim", "attn_dim", "mlp_dim", "n_seeds", "score_mean", "delta",
                   "delta_lo", "delta_hi", "verdict", "evidence", "delta_params_pct", "delta_train_throughput_pct",
                   "delta_infer_throughput_pct", "delta_mem_pct", "device_hours"]  # fmt: skip


def cost_sentence(device_s: list[float | None]) -> str:
    """What the space's trials cost in all (``device_s``: each trial's, None where it was not recorded), in words."""
    known = [value for value in device_s if value is not None]
    if not known:
        return "What it cost is not known: no trial recorded its device-seconds (results from before they were).\n"
    unknown = len(device_s) - len(known)
    missing = f"; {unknown} trials from before device-seconds were recorded are not counted" if unknown else ""
    return (
        f"What it cost: {sum(known) / 3600:.4g} device-hours over {len(known)} trials (GPU-hours, or CPU-hours for "
        f"trials without a GPU); `device_hours` below is each config's, every trial of it counted{missing}.\n"
    )


INFEASIBLE_COLUMNS = ["trials", "diverged_fraction", "oom_fraction", "error_fraction", "pruned_fraction"]
