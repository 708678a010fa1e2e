"""Fine-tuning a pretrained masked LM on GLUE tasks and scoring it: the second phase of a Crammed BERT trial.

For each task in ``data.glue.tasks`` (in order): a classifier is made from a copy of the pretrained encoder
(``CrammedMaskedLM.classifier``: the [CLS] position's final state, a dense-GELU-norm head, a linear layer to
the task's labels, or to one output for STS-B), trained with the recipe in ``train.finetune``
(:class:`~workers.config.FinetuneSpec`, cramming's by default), and scored on the task's dev split with the
task's GLUE metric (``workers.data.glue.task_score``: accuracy, F1, Matthews correlation or Spearman, in percent).
The pretrained model itself is never changed. ``mnli`` and ``mnli_mm`` share MNLI's training split: the
classifier trained for the first is scored on both dev sets, not trained twice.

Recipe per task: AdamW (no decay on 1-D parameters), linear warm-up over ``warmup_fraction`` of the steps,
then cosine decay to ``min_lr``; steps = epochs × (train rows // batch), capped by ``max_steps``; loss
cross-entropy over the labels, mean squared error for STS-B; data order from a generator seeded with the
trial seed and the task's position, so a trial is reproducible. The GLUE average is the mean of the task
scores (``workers.data.glue.glue_average``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from workers.batch import forward
from workers.config import FinetuneSpec, TrainSpec
from workers.data.glue import get_task, glue_average, task_score
from workers.train import DivergedError, autocast_for, make_context, train_step

log = logging.getLogger("workers.finetune")

GLUE_COLUMN_PREFIX = "glue_"  # a trials row holds each task's score as glue_<task> (glue_cola, glue_mnli_mm …)


class RegressionLoss(nn.Module):
    """Mean squared error between a (B, 1) output and (B,) float targets (STS-B)."""

    def forward(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(outputs.squeeze(-1).float(), targets.float())


@dataclass
class TaskResult:
    """One task's fine-tuning and its dev score (percent, the task's metric)."""

    task: str
    metric: str
    score: float
    train_rows: int
    dev_rows: int
    steps: int
    train_s: float


def recipe_as_train_spec(finetune: FinetuneSpec, total_steps: int, pretraining: TrainSpec) -> TrainSpec:
    """The fine-tuning recipe in the form the training loop's helpers take (precision from pretraining)."""
    return TrainSpec(
        epochs=finetune.epochs,
        max_steps=finetune.max_steps,
        batch_size=finetune.batch_size,
        eval_batch_size=finetune.eval_batch_size,
        lr=finetune.lr,
        min_lr=finetune.min_lr,
        weight_decay=finetune.weight_decay,
        warmup_steps=int(finetune.warmup_fraction * total_steps),
        label_smoothing=0.0,
        grad_clip_norm=finetune.grad_clip_norm,
        amp_bf16=pretraining.amp_bf16,
        deterministic=pretraining.deterministic,
    )


def train_classifier(classifier: nn.Module, data, task: str, finetune: FinetuneSpec, pretraining: TrainSpec,
                     device: torch.device, generator: torch.Generator) -> int:  # fmt: skip
    """Fine-tune ``classifier`` on the task's training split; returns the steps taken."""
    rows = len(data.glue_arrays(task).labels_train)
    steps_per_epoch = rows // finetune.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"glue task {task}: train.finetune.batch_size={finetune.batch_size} exceeds its {rows} rows")
    total = min(finetune.epochs * steps_per_epoch, finetune.max_steps or 10**12)
    ctx = make_context(classifier, recipe_as_train_spec(finetune, total, pretraining), device, total)
    if get_task(task).is_regression:
        ctx.loss_fn = RegressionLoss()
    loss_sum = torch.zeros((), device=device)
    while ctx.step < total:
        for inputs, labels in data.glue_batches(task, "train", finetune.batch_size, generator):
            if ctx.step >= total:
                break
            if len(labels) < finetune.batch_size:  # the ragged last batch: every step the same shape
                continue
            loss_sum += train_step(ctx, inputs, labels)
    if not torch.isfinite(loss_sum).item():
        raise DivergedError(f"fine-tuning on {task} diverged: training loss {loss_sum.item()}")
    return ctx.step


@torch.no_grad()
def predict(classifier: nn.Module, data, task: str, batch_size: int, device, pretraining: TrainSpec):
    """(predictions, labels) over the task's dev split: class indices, or floats for a regression."""
    classifier.eval()
    regression = get_task(task).is_regression
    predictions, targets = [], []
    for inputs, labels in data.glue_batches(task, "dev", batch_size):
        with autocast_for(device, pretraining):
            outputs = forward(classifier, inputs).float()
        predictions.append(outputs.squeeze(-1) if regression else outputs.argmax(dim=-1))
        targets.append(labels)
    classifier.train()
    return torch.cat(predictions).cpu().numpy(), torch.cat(targets).cpu().numpy()


def finetune_glue(model: nn.Module, data, finetune: FinetuneSpec | None, pretraining: TrainSpec,
                  device: torch.device, seed: int) -> list[TaskResult]:  # fmt: skip
    """Every GLUE task of ``data`` (an ``MLMBatches``), as the module docstring describes."""
    finetune = finetune or FinetuneSpec()
    results: list[TaskResult] = []
    trained: dict[int, tuple[nn.Module, int]] = {}  # by training split: mnli_mm reuses mnli's
    for index, task in enumerate(data.glue_tasks):
        arrays = data.glue_arrays(task)
        key = id(arrays.ids_train)
        train_s = 0.0  # a classifier reused from an earlier task took no time of its own
        if key not in trained:
            start = time.perf_counter()
            classifier = model.classifier(get_task(task).num_labels).to(device)
            generator = torch.Generator().manual_seed(seed * 1000 + index)
            steps = train_classifier(classifier, data, task, finetune, pretraining, device, generator)
            train_s = time.perf_counter() - start
            trained[key] = classifier, steps
        classifier, steps = trained[key]
        predictions, labels = predict(classifier, data, task, finetune.eval_batch_size, device, pretraining)
        score = task_score(task, predictions, labels)
        log.info("glue %s: %s %.2f after %d steps", task, get_task(task).metric, score, steps)
        results.append(
            TaskResult(task, get_task(task).metric, score, len(arrays.labels_train), len(labels), steps, train_s)
        )
    return results


def glue_fields(results: list[TaskResult]) -> dict:
    """The trials row's GLUE columns: ``glue_avg`` and ``glue_<task>`` per task (percent), and the seconds
    fine-tuning took (``finetune_s``)."""
    scores = {result.task: result.score for result in results}
    return {
        "glue_avg": glue_average(scores),
        **{GLUE_COLUMN_PREFIX + task: score for task, score in scores.items()},
        "finetune_s": float(np.sum([result.train_s for result in results])),
    }
