"""GLUE fine-tuning (workers/finetune.py) on a tiny bag-of-embeddings encoder and hand-made encoded tasks:
the steps each recipe takes, MNLI's classifier trained once and scored on both dev sets, each score
recomputed here from the classifier's own predictions with numpy/scipy, the pretrained model untouched, and
the trials row's GLUE columns."""

import copy

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from torch import nn

from workers.config import FinetuneSpec, TrainSpec
from workers.data.glue_encoding import GlueArrays, glue_batches
from workers.finetune import RegressionLoss, finetune_glue, glue_fields, recipe_as_train_spec

CPU = torch.device("cpu")
VOCAB, SEQ_LEN = 20, 6
PRETRAINING = TrainSpec(amp_bf16=False)


class Classifier(nn.Module):
    """The mean embedding of the real tokens, then a linear layer to the labels."""

    def __init__(self, embedding: nn.Embedding, num_labels: int):
        super().__init__()
        self.embedding = embedding
        self.head = nn.Linear(embedding.embedding_dim, num_labels)

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        return self.head((self.embedding(input_ids) * mask).sum(1) / mask.sum(1))


class Encoder(nn.Module):
    """A pretrained model as finetune_glue sees one: ``classifier(num_labels)`` copies its encoder."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, 8)
        self.made: list[Classifier] = []

    def classifier(self, num_labels: int) -> Classifier:
        self.made.append(Classifier(copy.deepcopy(self.embedding), num_labels))
        return self.made[-1]


def encoded(task, metric, num_labels, train_rows, dev_rows, seed, ids_train=None, regression=False):
    rng = np.random.default_rng(seed)

    def split(rows):
        ids = rng.integers(1, VOCAB, (rows, SEQ_LEN)).astype(np.uint8)
        lengths = rng.integers(2, SEQ_LEN + 1, rows).astype(np.int32)
        labels = rng.uniform(0, 5, rows).astype(np.float32) if regression else rng.integers(0, num_labels, rows)
        return ids, lengths, labels

    train = split(train_rows) if ids_train is None else (ids_train.ids_train, ids_train.lengths_train,
                                                          ids_train.labels_train)  # fmt: skip
    return GlueArrays(task, metric, num_labels, *train, *split(dev_rows), 0)


class Data:
    """What finetune_glue reads of an MLMBatches: the tasks, their arrays and their batches."""

    def __init__(self):
        mnli = encoded("mnli", "accuracy", 3, 12, 7, seed=1)
        self.arrays = {
            "rte": encoded("rte", "accuracy", 2, 10, 6, seed=0),
            "mnli": mnli,
            "mnli_mm": encoded("mnli_mm", "accuracy", 3, 0, 5, seed=2, ids_train=mnli),  # MNLI's train split
            "stsb": encoded("stsb", "spearman", 1, 9, 8, seed=3, regression=True),
        }
        self.glue_tasks = list(self.arrays)

    def glue_arrays(self, task):
        return self.arrays[task]

    def glue_batches(self, task, split, batch_size, generator=None):
        return glue_batches(self.arrays[task], split, batch_size, CPU, generator)


def predictions(classifier, arrays, regression):
    ids = torch.as_tensor(arrays.ids_dev.astype(np.int64))
    mask = (torch.arange(SEQ_LEN) < torch.as_tensor(arrays.lengths_dev)[:, None]).long()
    with torch.no_grad():
        out = classifier(ids, mask)
    return out.squeeze(-1).numpy() if regression else out.argmax(-1).numpy()


def test_each_task_is_fine_tuned_and_scored_with_its_metric_and_mnli_once():
    torch.manual_seed(0)
    model, data = Encoder(), Data()
    pretrained = model.embedding.weight.detach().clone()
    finetune = FinetuneSpec(epochs=2, batch_size=4, lr=1e-2, warmup_fraction=0.25)
    results = finetune_glue(model, data, finetune, PRETRAINING, CPU, seed=3)
    assert [r.task for r in results] == ["rte", "mnli", "mnli_mm", "stsb"]
    assert len(model.made) == 3  # mnli_mm is scored with mnli's classifier
    assert [r.steps for r in results] == [2 * (10 // 4), 2 * (12 // 4), 2 * (12 // 4), 2 * (9 // 4)]
    assert results[2].train_s == 0.0 and results[1].train_s > 0
    assert [(r.train_rows, r.dev_rows) for r in results] == [(10, 6), (12, 7), (12, 5), (9, 8)]
    assert torch.equal(model.embedding.weight, pretrained)  # the pretrained model is never changed
    assert not torch.equal(model.made[0].embedding.weight, pretrained)  # its copy was trained
    rte, mnli, stsb = model.made
    for result, classifier in zip(results, [rte, mnli, mnli, stsb], strict=True):
        arrays = data.arrays[result.task]
        predicted = predictions(classifier, arrays, result.task == "stsb")
        if result.task == "stsb":
            assert result.metric == "spearman"
            assert result.score == pytest.approx(100 * spearmanr(predicted, arrays.labels_dev).statistic, abs=1e-4)
        else:
            assert result.metric == "accuracy"
            assert result.score == pytest.approx(100 * np.mean(predicted == arrays.labels_dev))
    fields = glue_fields(results)
    assert fields["glue_avg"] == pytest.approx(np.mean([r.score for r in results]))
    assert {key for key in fields if key.startswith("glue_")} == {"glue_avg", *(f"glue_{t}" for t in data.glue_tasks)}
    assert fields["finetune_s"] == pytest.approx(sum(r.train_s for r in results))


def test_max_steps_caps_every_task_and_a_batch_larger_than_a_split_is_refused():
    torch.manual_seed(0)
    capped = finetune_glue(Encoder(), Data(), FinetuneSpec(epochs=5, batch_size=2, max_steps=3), PRETRAINING, CPU, 0)
    assert [r.steps for r in capped] == [3, 3, 3, 3]
    with pytest.raises(ValueError, match=r"glue task rte: train\.finetune\.batch_size=11 exceeds its 10 rows"):
        finetune_glue(Encoder(), Data(), FinetuneSpec(batch_size=11), PRETRAINING, CPU, 0)


def test_the_recipe_and_the_regression_loss():
    spec = recipe_as_train_spec(FinetuneSpec(warmup_fraction=0.1, lr=3e-5), 47, TrainSpec(amp_bf16=False))
    assert (spec.warmup_steps, spec.label_smoothing, spec.lr, spec.amp_bf16) == (4, 0.0, 3e-5, False)
    outputs, targets = torch.tensor([[1.0], [2.5], [0.0]]), torch.tensor([2.0, 2.5, 1.0])
    assert RegressionLoss()(outputs, targets).item() == pytest.approx((1.0 + 0.0 + 1.0) / 3)
