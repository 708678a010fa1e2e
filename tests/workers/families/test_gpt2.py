"""The causal language-model family (GPT-2 from HF transformers): parameters and FLOPs against closed forms
written here, GPT-2 small's published count, the head_dim control, κ of causal attention against a float64
computation written here, and the per-token loss the training loop and evaluation use."""

import math

import numpy as np
import pytest
import torch

from tests.helpers import TORCH_THREADS, assert_tables_agree, capture_layer_inputs, run_smoke_profile
from workers.config import ModelSpec, TrainSpec
from workers.models import ModelConfigError, build_model, kappa_layers
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer
from workers.probes.params import param_breakdown
from workers.train import IGNORE_INDEX, evaluate, flatten_tokens


def gpt2_spec(depth=2, heads=4, width=32, mlp=64, seq_len=16, vocab=50, head_dim=None) -> ModelSpec:
    return ModelSpec(
        family="gpt2", depth=depth, num_heads=heads, embed_dim=width, mlp_dim=mlp, seq_len=seq_len,
        vocab_size=vocab, num_classes=vocab, head_dim=head_dim,
    )  # fmt: skip


def expected_params(s: ModelSpec) -> int:
    """GPT-2 counted by hand: token and position embeddings; per block two LayerNorms, c_attn (d → 3w) and
    c_proj (w → d) with biases, the MLP (d → m → d) with biases; the final LayerNorm. The output layer is
    tied to the token embedding. w = heads × head_dim."""
    d, m = s.embed_dim, s.mlp_dim
    w = s.num_heads * (s.head_dim or d // s.num_heads)
    block = 2 * d + (d * 3 * w + 3 * w) + (w * d + d) + 2 * d + (d * m + m) + (m * d + d)
    return s.vocab_size * d + s.seq_len * d + s.depth * block + 2 * d


def expected_flops(s: ModelSpec) -> int:
    """Forward FLOPs of one window of N tokens (2 per multiply-add; matmuls only): per block the q, k, v
    projection 2·N·d·3w, the scores and their product with V 2·2·N²·w (the causal mask does not skip the
    product), the output projection 2·N·w·d and the MLP 2·2·N·d·m; the output layer 2·N·d·vocab."""
    d, m, n = s.embed_dim, s.mlp_dim, s.seq_len
    w = s.num_heads * (s.head_dim or d // s.num_heads)
    block = 2 * n * d * 3 * w + 4 * n * n * w + 2 * n * w * d + 4 * n * d * m
    return s.depth * block + 2 * n * d * s.vocab_size


@pytest.mark.parametrize("heads,head_dim", [(4, None), (2, None), (8, 16), (1, 64)])
def test_params_and_flops_match_closed_forms(heads, head_dim):
    s = gpt2_spec(heads=heads, head_dim=head_dim)
    breakdown = param_breakdown(s, build_model(s))
    assert breakdown["params"] == expected_params(s)
    assert forward_flops_per_sample(s) == expected_flops(s)


def test_gpt2_small_has_its_published_count():
    """GPT-2 small (12 × 12, d 768, 1,024 positions, 50,257 tokens): 124,439,808 parameters, as HF reports."""
    s = gpt2_spec(depth=12, heads=12, width=768, mlp=3072, seq_len=1024, vocab=50257)
    assert expected_params(s) == 124_439_808
    with torch.device("meta"):
        model = build_model(s)
    assert param_breakdown(s, model)["params"] == 124_439_808


def test_head_dim_is_independent_of_width_only_when_asked():
    plain = build_model(gpt2_spec(heads=4))
    wide = build_model(gpt2_spec(heads=4, head_dim=16))
    assert plain.lm.transformer.h[0].attn.c_attn.weight.shape == (32, 96)  # Conv1D: (in, out)
    assert wide.lm.transformer.h[0].attn.c_attn.weight.shape == (32, 192)
    assert wide.lm.transformer.h[0].attn.c_proj.weight.shape == (64, 32)
    with pytest.raises(ModelConfigError, match="must give seq_len and vocab_size"):
        build_model(ModelSpec(family="gpt2", depth=1, num_heads=2, embed_dim=16, mlp_dim=32))


# --- κ of causal attention ----------------------------------------------------------------------------------


def direct_causal_blocks(attention, hidden: torch.Tensor) -> list[np.ndarray]:
    """softmax(mask(Q_i K_iᵀ/√d)) V_i per window, heads concatenated, written out in numpy float64."""
    x = hidden.detach().double().numpy()
    weight = attention.c_attn.weight.detach().double().numpy()
    bias = attention.c_attn.bias.detach().double().numpy()
    heads, hd = attention.num_heads, attention.head_dim
    blocks = []
    for window in x:
        n = len(window)
        q, k, v = np.split(window @ weight + bias, 3, axis=-1)
        q, k, v = (a.reshape(n, heads, hd).transpose(1, 0, 2) for a in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        scores[:, np.triu(np.ones((n, n), dtype=bool), 1)] = -np.inf  # token t sees tokens ≤ t
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        blocks.append((weights @ v).transpose(1, 0, 2).reshape(n, heads * hd))
    return blocks


@pytest.mark.parametrize("head_dim", [None, 16])
def test_kappa_matches_a_direct_float64_computation_with_the_causal_mask(head_dim):
    torch.manual_seed(0)
    s = gpt2_spec(heads=4, head_dim=head_dim)
    model = build_model(s).eval()
    windows = {"input_ids": torch.randint(0, 50, (3, 16)), "attention_mask": torch.ones(3, 16, dtype=torch.long)}
    layers = kappa_layers(s, model)
    captured = capture_layer_inputs(model, layers, windows)
    rows = kappa_per_layer(s, model, windows)
    assert {row["attention"] for row in rows} == {"causal"}
    for layer, row in zip(layers, rows, strict=True):
        kappas = []
        for block in direct_causal_blocks(layer.module, captured[layer.name]):
            singular = np.linalg.svd(block, compute_uv=False)
            kappas.append(singular[0] / singular[-1])
        assert row["kappa"] == pytest.approx(float(np.median(kappas)), rel=1e-6)
        assert row["kappa_max"] == pytest.approx(max(kappas), rel=1e-6)


def test_causal_attention_output_matches_hf_forward():
    """The probe's A, through the output projection, the residual and the MLP, is exactly HF's block
    output (float64): the block computes nothing else from attention."""
    torch.manual_seed(1)
    s = gpt2_spec(heads=4, head_dim=16)
    model = build_model(s).double().eval()
    block = model.lm.transformer.h[0]
    hidden = torch.randn(2, 16, 32, dtype=torch.float64)
    with torch.no_grad():
        theirs = block(hidden)
        theirs = theirs[0] if isinstance(theirs, tuple) else theirs
        a = kappa_layers(s, model)[0].block(block.attn, block.ln_1(hidden), 2)[:, 0]  # (windows, N, h·d)
        ours = hidden + block.attn.c_proj(a)
        ours = ours + block.mlp(block.ln_2(ours))
    assert torch.allclose(theirs, ours, atol=1e-10)


# --- per-token loss ------------------------------------------------------------------------------------------


def test_token_labels_flatten_and_ignored_tokens_are_not_scored():
    logits = torch.randn(2, 3, 5)
    labels = torch.tensor([[1, IGNORE_INDEX, 4], [IGNORE_INDEX, IGNORE_INDEX, 0]])
    flat_logits, flat_labels = flatten_tokens(logits, labels)
    assert flat_logits.shape == (6, 5) and flat_labels.tolist() == [1, -100, 4, -100, -100, 0]

    class Fixed(torch.nn.Module):
        def forward(self, input_ids, attention_mask):
            return logits

    scores = evaluate(
        Fixed(), [({"input_ids": labels, "attention_mask": labels}, labels)], torch.device("cpu"), TrainSpec()
    )
    scored = [(0, 0, 1), (0, 2, 4), (1, 2, 0)]
    nll = [-torch.log_softmax(logits[b, t], -1)[y].item() for b, t, y in scored]
    assert scores["val_loss"] == pytest.approx(sum(nll) / 3)
    assert scores["perplexity"] == pytest.approx(math.exp(sum(nll) / 3))
    hits = sum(int(logits[b, t].argmax() == y) for b, t, y in scored)
    assert scores["accuracy"] == pytest.approx(100 * hits / 3)


# --- training on the generated task ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_small_gpt2_on_mqar_gets_below_the_uniform_loss():
    """Uniform prediction over the 32 ids costs ln 32 = 3.47 nats per answer; a short run must beat it by a
    wide margin (answers are values, 16 of the 32 ids, so even that alone is worth ln 2)."""
    from workers.trial import run_trial

    mqar = {"vocab_size": 32, "num_kv_pairs": 2, "train_rows": 4000, "val_rows": 500}
    config = {
        "model": {"family": "gpt2", "depth": 2, "num_heads": 4, "embed_dim": 32, "mlp_dim": 64},
        "data": {"name": "mqar", "seq_len": 16, "mqar": mqar},
        "train": {"epochs": 1, "max_steps": 120, "batch_size": 32, "lr": 3e-3, "warmup_steps": 10},
        "probes": {"kappa_samples": 4, "throughput_steps": 2, "latency_iters": 2},
        "threads": TORCH_THREADS,
    }
    record = run_trial(config)
    assert record["status"] == "ok", record.get("error")
    assert record["val_loss"] < math.log(32) - 0.5
    assert record["perplexity"] == pytest.approx(math.exp(record["val_loss"]))
    assert record["seq_len"] == 16 and record["train_tokens_per_s"] == pytest.approx(record["train_samples_per_s"] * 16)
    assert {row["attention"] for row in record["kappa"]} == {"causal"}
    assert all("val_perplexity" in row and "val_accuracy" in row for row in record["epochs"])


@pytest.mark.slow
def test_mqar_smoke_profile_runs_through_the_cli(tmp_path, local_ray, capfd):
    """The embedded language-model space as users run it: `sweep run`, then the analysis on accuracy."""
    from sweep.analysis.sql import run_query

    results = tmp_path / "results"
    trials = run_smoke_profile("mqar_recall", results, capfd)
    assert len(trials) == 4 and {t["status"] for t in trials} == {"ok"}
    for trial in trials:
        assert trial["metric"] == "accuracy" and trial["score"] == trial["accuracy"]
        assert trial["perplexity"] == pytest.approx(math.exp(trial["val_loss"]))
        assert trial["seq_len"] == 16
    assert_tables_agree(results)
    _, values = run_query(results, "SELECT verdict, evidence, baseline_at_chance, is_baseline FROM vs_baseline")
    assert len(values) == 4 and {verdict for verdict, *_ in values} <= {"baseline", "inconclusive"}  # one seed each
    for _, evidence, at_chance, is_baseline in values:  # 20 steps: the baseline may not beat the in-context guess
        wanted = "baseline" if is_baseline else ("baseline at chance" if at_chance else "single seed")
        assert evidence == wanted
