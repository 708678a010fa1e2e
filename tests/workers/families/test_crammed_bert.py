"""The Crammed BERT family (HF ModernBERT layers in cramming's layout): parameter counts at the paper's
shapes against closed forms written here (and against cramming's own layout), FLOPs, κ of bidirectional
attention with rotary positions and padding against a float64 computation written here (RoPE as complex
rotations), the probe's A against HF's own forward, and the classifier made from the encoder."""

import numpy as np
import pytest
import torch

from tests.helpers import assert_tables_agree, capture_layer_inputs, run_smoke_profile
from workers.config import ModelSpec
from workers.models import build_model, kappa_layers
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer
from workers.probes.params import param_breakdown


def bert_spec(depth=2, heads=4, width=32, mlp=48, seq_len=16, vocab=60, kv=None) -> ModelSpec:
    return ModelSpec(
        family="crammed_bert", depth=depth, num_heads=heads, embed_dim=width, mlp_dim=mlp, seq_len=seq_len,
        vocab_size=vocab, num_classes=vocab, num_kv_heads=kv,
    )  # fmt: skip


def expected_params(s: ModelSpec) -> int:
    """Counted by hand: the token embedding (the output layer is tied to it, without bias); per layer Wqkv
    (d → 3d) and Wo (d → d), the gated MLP Wi (d → 2m) and Wo (m → d), no biases; LayerNorms without bias
    (d each): the embeddings', each layer's attention norm but the first's, each layer's MLP norm, the final."""
    d, m, layers = s.embed_dim, s.mlp_dim, s.depth
    block = 3 * d * d + d * d + d * 2 * m + m * d
    return s.vocab_size * d + layers * block + d + (layers - 1) * d + layers * d + d


def cramming_layout_params(depth: int, d: int = 768, m: int = 1536, vocab: int = 32768) -> int:
    """cramming's crammed-bert.yaml counted by hand: the same linear layers, LayerNorms with bias (2d) after
    the embeddings, twice per layer and at the end, and the scaled sinusoid's one learned scale."""
    block = 3 * d * d + d * d + d * 2 * m + m * d + 2 * (2 * d)
    return vocab * d + 2 * d + 1 + depth * block + 2 * d


@pytest.mark.parametrize("depth,heads,published", [(16, 12, 119.0e6), (10, 24, 84.0e6)])
def test_paper_shapes_have_the_published_counts(depth, heads, published):
    s = bert_spec(depth=depth, heads=heads, width=768, mlp=1536, seq_len=128, vocab=32768)
    with torch.device("meta"):
        model = build_model(s)
    counted = param_breakdown(s, model)["params"]
    assert counted == expected_params(s)
    assert abs(counted / published - 1) < 0.01
    # cramming's own layout differs only by LayerNorm biases, the extra first-layer norm and one scale:
    assert cramming_layout_params(depth) - counted == (2 * depth + 3) * 768 + 1
    assert abs(cramming_layout_params(depth) / published - 1) < 0.01


def test_flops_match_a_closed_form():
    """Forward FLOPs of one sequence of N tokens (2 per multiply-add; matmuls only): per layer Wqkv 2·N·d·3d,
    scores and their product with V 2·2·N²·d, Wo 2·N·d·d, Wi 2·N·d·2m, the MLP's Wo 2·N·m·d; the output
    layer 2·N·d·vocab."""
    s = bert_spec()
    d, m, n = s.embed_dim, s.mlp_dim, s.seq_len
    block = 2 * n * d * 3 * d + 4 * n * n * d + 2 * n * d * d + 2 * n * d * 2 * m + 2 * n * m * d
    assert forward_flops_per_sample(s) == s.depth * block + 2 * n * d * s.vocab_size


def rope_by_complex_rotation(x: np.ndarray, theta: float = 10_000.0) -> np.ndarray:
    """Rotary positions written independently: channel j pairs with j + d/2 as the complex number
    x_j + i·x_{j+d/2}, multiplied by exp(i · t · θ^(-2j/d)) at position t. x: (heads, N, d)."""
    half = x.shape[-1] // 2
    z = x[..., :half] + 1j * x[..., half:]
    angles = np.arange(x.shape[-2])[:, None] * theta ** (-np.arange(half) * 2.0 / x.shape[-1])
    rotated = z * np.exp(1j * angles)
    return np.concatenate([rotated.real, rotated.imag], axis=-1)


def direct_blocks(attention, hidden: torch.Tensor, mask: torch.Tensor) -> list[np.ndarray]:
    """A per sample at its real tokens, in float64 numpy: Wqkv, RoPE, softmax(QKᵀ/√d) V per head, heads
    concatenated."""
    heads, head_dim = attention.config.num_attention_heads, attention.head_dim
    weight = attention.Wqkv.weight.detach().double().numpy()
    blocks = []
    for sample, keep in zip(hidden.double().numpy(), mask.numpy().astype(bool), strict=True):
        tokens = sample[keep]
        n = len(tokens)
        q, k, v = ((tokens @ weight.T)[:, i * heads * head_dim:(i + 1) * heads * head_dim]
                   .reshape(n, heads, head_dim).transpose(1, 0, 2) for i in range(3))  # fmt: skip
        q, k = rope_by_complex_rotation(q), rope_by_complex_rotation(k)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(head_dim)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        blocks.append((weights @ v).transpose(1, 0, 2).reshape(n, heads * head_dim))
    return blocks


def padded_batch(vocab=60, lengths=(16, 11, 7)):
    ids = torch.randint(5, vocab, (len(lengths), 16))
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        ids[row, length:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def test_kappa_matches_a_direct_float64_computation_with_rope_and_padding():
    torch.manual_seed(0)
    s = bert_spec(heads=4)
    model = build_model(s).eval()
    batch = padded_batch()
    layers = kappa_layers(s, model)
    captured = capture_layer_inputs(model, layers, batch)
    rows = kappa_per_layer(s, model, batch)
    assert {row["attention"] for row in rows} == {"self"} and len(rows) == 2
    for layer, row in zip(layers, rows, strict=True):
        kappas = []
        for block in direct_blocks(layer.module, captured[layer.name], batch["attention_mask"]):
            singular = np.linalg.svd(block, compute_uv=False)
            kappas.append(singular[0] / singular[-1])
        assert row["kappa"] == pytest.approx(float(np.median(kappas)), rel=1e-6)
        assert row["kappa_max"] == pytest.approx(max(kappas), rel=1e-6)


@pytest.mark.parametrize("heads, kv", [(2, None), (4, 2)])
def test_probe_block_is_what_hf_attention_computes(heads, kv):
    """The probe's A at the real tokens, through Wo, equals HF's attention output there (the model's own
    forward, float64, padded keys masked); with grouped heads too (kv = 2: h blocks, query head i reading
    key/value head ⌊i/(h/kv)⌋)."""
    torch.manual_seed(1)
    s = bert_spec(heads=heads, kv=kv)
    model = build_model(s).double().eval()
    batch = padded_batch()
    attention = model.lm.model.layers[1].attn
    seen = {}
    hook = attention.register_forward_hook(lambda _m, args, out: seen.update(input=args[0], output=out[0]))
    with torch.no_grad():
        model(**batch)
        hook.remove()
        mask = batch["attention_mask"].bool()
        blocks = kappa_layers(s, model)[1].block(attention, seen["input"], 3, mask)
        for row, block in enumerate(blocks):
            assert block.shape[-1] == s.num_heads * s.resolved_head_dim  # h · d, whatever kv
            assert torch.allclose(attention.Wo(block[0]), seen["output"][row, mask[row]], atol=1e-10)


def test_classifier_copies_the_encoder_and_leaves_the_pretrained_model_alone():
    torch.manual_seed(2)
    s = bert_spec()
    model = build_model(s)
    classifier = model.classifier(3)
    batch = padded_batch()
    assert classifier(**batch).shape == (3, 3)
    assert torch.equal(classifier.encoder.layers[0].attn.Wqkv.weight, model.lm.model.layers[0].attn.Wqkv.weight)
    with torch.no_grad():
        classifier.encoder.layers[0].attn.Wqkv.weight.add_(1.0)
    assert not torch.equal(classifier.encoder.layers[0].attn.Wqkv.weight, model.lm.model.layers[0].attn.Wqkv.weight)
    assert model(**batch).shape == (3, 16, 60)
    assert model.classifier(1)(**batch).shape == (3, 1)  # a regression (STS-B)


def test_every_glue_task_has_a_trials_column():
    from sweep.results.schema import GLUE_TASK_NAMES, TRIALS
    from workers.data.glue import GLUE_TASKS

    assert set(GLUE_TASK_NAMES) == set(GLUE_TASKS)
    assert {f"glue_{task}" for task in GLUE_TASKS} | {"glue_avg"} <= set(TRIALS.names)


# --- the two phases, the space, the CLI --------------------------------------------------------------------


def tiny_trial(finetune: dict, steps: int = 30) -> dict:
    """A Crammed BERT trial on the generated corpus and the generated GLUE-layout task (no files)."""
    return {
        "model": {"family": "crammed_bert", "depth": 2, "num_heads": 2, "embed_dim": 32, "mlp_dim": 64},
        "data": {
            "name": "mlm_corpus", "seq_len": 32,
            "corpus": {"source": "generated", "generated_sentences": 3000, "vocab_size": 256},
            "glue": {"tasks": ["synthetic"], "generated": True, "generated_train_rows": 2000,
                     "generated_dev_rows": 200},
        },
        "train": {"epochs": 1, "max_steps": steps, "batch_size": 32, "eval_batch_size": 128, "lr": 3e-3,
                  "warmup_steps": 5, "finetune": finetune},
        "probes": {"kappa_samples": 4, "kappa_every_epochs": 0, "throughput_steps": 2, "latency_iters": 2},
        "seed": 0, "threads": 1,
    }  # fmt: skip


@pytest.mark.slow
def test_pretraining_then_fine_tuning_learns_the_generated_task():
    """Masked-token loss from pretraining beside the GLUE score after fine-tuning: the classifier learns the
    generated task (chance is 50%; the label needs the polarity word and whether "not" negates it)."""
    from workers.trial import run_trial

    record = run_trial(tiny_trial({"epochs": 5, "batch_size": 32, "lr": 2e-3}))
    assert record["status"] == "ok", record.get("error")
    assert record["glue_synthetic"] > 75 and record["glue_avg"] == record["glue_synthetic"]
    assert record["val_loss"] < np.log(256)  # masked tokens: below the uniform guess over the vocabulary
    assert record["finetune_s"] > 0 and record["tokenizer"].startswith("trained:wordpiece-256-")
    assert record["params"] == expected_params(bert_spec(width=32, mlp=64, heads=2, seq_len=32, vocab=256))


@pytest.mark.parametrize("profile", ["paper", "breaks", "smoke"])
def test_every_profile_validates_and_plans(profile):
    from sweep.plan.plan import make_plan
    from sweep.space.loader import load_space

    plan = make_plan(*load_space("crammed_bert", profile))
    assert plan.configs and sum(c.is_baseline for c in plan.configs) == 1
    assert plan.space.metric.name == "glue_avg" and plan.space.metric.mode == "max"


def test_plan_prints_the_published_counts(capsys):
    from sweep.cli import main

    assert main(["plan", "crammed_bert"]) == 0
    out = capsys.readouterr().out
    assert (
        "Crammed BERT 16 × 12 (depth 16, num_heads 12): 119.0M, glue_avg 78.6, planned 119.56M (+0.5%): reproduced"
        in out
    )
    assert (
        "Crammed BERT 10 × 24 (depth 10, num_heads 24): 84.0M, glue_avg 78.6, planned 84.16M (+0.2%): reproduced" in out
    )


@pytest.mark.slow
def test_smoke_profile_runs_through_the_cli(tmp_path, local_ray, capfd):
    """`make sweep SPACE=crammed_bert PROFILE=smoke` as users run it: ok rows with the GLUE average as score,
    the task's own column, κ and throughput; the plan's parameter count is the trained model's."""
    from sweep.analysis.sql import run_query

    results = tmp_path / "results"
    trials = run_smoke_profile("crammed_bert", results, capfd)
    assert len(trials) == 4 and {t["status"] for t in trials} == {"ok"}
    for trial in trials:
        assert trial["metric"] == "glue_avg" and trial["score"] == trial["glue_avg"] == trial["glue_synthetic"]
        assert 0 <= trial["score"] <= 100 and trial["glue_cola"] is None
        spec = bert_spec(depth=trial["depth"], heads=trial["num_heads"], width=32, mlp=64, seq_len=32, vocab=256)
        assert trial["params"] == expected_params(spec)
    assert_tables_agree(results)
    _, values = run_query(results, "SELECT verdict FROM vs_baseline")
    assert len(values) == 4
