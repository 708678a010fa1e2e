"""Grouped-query attention (``num_kv_heads``) in the GPT-2 family: the model at num_kv_heads = num_heads is
HF's own, each key/value head serves its group of query heads (against an MHA GPT-2 with the K/V weights
copied per group), HF's KV cache in ``generate`` holds only the kv heads and decodes as the full forward
does, parameters and FLOPs against closed forms written here, κ against a float64 computation written here,
and ``kv_cache_bytes_per_token`` against the bytes of HF's cache after ``generate``."""

import math
from contextlib import nullcontext

import numpy as np
import pytest
import torch

from tests.helpers import capture_layer_inputs
from workers.config import ModelSpec
from workers.models import build_model, kappa_layers
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer
from workers.probes.params import param_breakdown
from workers.probes.throughput import generated_token_latency_ms, kv_cache_bytes_per_token

VOCAB = 50


def gqa_spec(heads=4, kv=None, depth=2, width=32, mlp=64, seq_len=16, head_dim=None) -> ModelSpec:
    return ModelSpec(
        family="gpt2", depth=depth, num_heads=heads, num_kv_heads=kv, embed_dim=width, mlp_dim=mlp,
        seq_len=seq_len, vocab_size=VOCAB, num_classes=VOCAB, head_dim=head_dim,
    )  # fmt: skip


def windows(batch=2, tokens=16, seed=0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, tokens), generator=torch.Generator().manual_seed(seed))


def test_num_kv_heads_equal_to_num_heads_is_hf_gpt2_parameter_for_parameter():
    torch.manual_seed(0)
    plain = build_model(gqa_spec(heads=4))
    torch.manual_seed(0)
    same = build_model(gqa_spec(heads=4, kv=4))
    assert type(same.lm.transformer.h[0].attn) is type(plain.lm.transformer.h[0].attn)
    theirs, ours = plain.state_dict(), same.state_dict()
    assert theirs.keys() == ours.keys()
    assert all(torch.equal(theirs[name], ours[name]) for name in theirs)


@pytest.mark.parametrize("heads,kv,head_dim", [(4, 2, None), (4, 1, None), (8, 2, 16)])
def test_each_kv_head_serves_its_group_of_query_heads(heads, kv, head_dim):
    """A GQA GPT-2 computes what an MHA GPT-2 of the same h and d computes when query head i's key and value
    weights are key/value head ⌊i / (h/kv)⌋'s: checked in float64 on both of HF's attention paths."""
    torch.manual_seed(2)
    grouped = build_model(gqa_spec(heads=heads, kv=kv, head_dim=head_dim)).double().eval()
    full = build_model(gqa_spec(heads=heads, head_dim=head_dim)).double().eval()
    d = grouped.lm.transformer.h[0].attn.head_dim
    copy_grouped_weights(grouped, full, "c_attn", heads, kv, d, dim=1)  # Conv1D: (in, out)
    ids = windows()
    with torch.no_grad():
        expected = full(ids)
        for implementation in ("sdpa", "eager"):
            grouped.lm.config._attn_implementation = implementation
            assert torch.allclose(grouped(ids), expected, atol=1e-10), implementation


def copy_grouped_weights(grouped, full, fused: str, heads: int, kv: int, d: int, dim: int) -> None:
    """``full`` (multi-head) takes ``grouped``'s weights; its fused q/k/v projection ``fused`` (outputs along
    ``dim``) takes the queries as they are and, for query head i, key/value head ⌊i / (h/kv)⌋'s weights."""
    shared = {name: value for name, value in grouped.state_dict().items() if fused not in name}
    full.load_state_dict(shared, strict=False)
    theirs = {name: p for name, p in full.named_parameters() if fused in name}
    for name, ours in grouped.named_parameters():
        if fused in name:
            along = dim if ours.dim() > 1 else 0  # biases: their only dimension
            q, k, v = ours.split([heads * d, kv * d, kv * d], dim=along)
            k, v = (per_query_head(x, along, kv, heads // kv) for x in (k, v))
            with torch.no_grad():
                theirs[name].copy_(torch.cat([q, k, v], dim=along))


def per_query_head(x: torch.Tensor, along: int, kv: int, groups: int) -> torch.Tensor:
    """kv heads of width d along ``along``, each repeated for its ``groups`` query heads, in order."""
    heads = x.unflatten(along, (kv, -1)).repeat_interleave(groups, dim=along)
    return heads.flatten(along, along + 1)


def cache_of_generate(model, prompt: torch.Tensor, new_tokens: int):
    """HF's cache after greedy ``generate`` with it, and the ids generated."""
    out = model.lm.generate(
        prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
        do_sample=False, use_cache=True, pad_token_id=0, return_dict_in_generate=True,
    )  # fmt: skip
    return out.cache, out.sequences


@pytest.mark.parametrize("heads,kv", [(4, 4), (4, 2), (4, 1)])
def test_kv_cache_holds_only_the_kv_heads_and_decodes_as_the_full_forward(heads, kv):
    """HF's cache after ``generate`` holds (B, kv, tokens, d) per layer for K and V; its bytes per cached
    token are ``kv_cache_bytes_per_token``; greedy decoding with the cache picks, at every step, the argmax
    of a full forward over the whole sequence (no cache)."""
    torch.manual_seed(3)
    s = gqa_spec(heads=heads, kv=kv)
    model = build_model(s).eval()
    prompt = windows(batch=1, tokens=6, seed=1)
    with torch.no_grad():
        cache, sequences = cache_of_generate(model, prompt, 8)
        full = model(sequences)
    assert torch.equal(full[0, 5:-1].argmax(-1), sequences[0, 6:])
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    d = s.resolved_head_dim
    cached = cache.get_seq_length()
    assert cached >= 13  # the prompt and every generated token but (at most) the last
    assert all(t.shape == (1, kv, cached, d) for t in tensors)
    measured = sum(t.numel() * t.element_size() for t in tensors) / cached
    assert kv_cache_bytes_per_token(s, model, nullcontext) == measured == 2 * s.depth * kv * d * 4


def test_kv_cache_bytes_follow_the_dtype_k_and_v_are_computed_in():
    s = gqa_spec(heads=4, kv=2)
    model = build_model(s).to(torch.bfloat16)
    assert kv_cache_bytes_per_token(s, model, nullcontext) == 2 * 2 * 2 * 8 * 2
    cpu_bf16 = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    assert kv_cache_bytes_per_token(s, build_model(s), cpu_bf16) == 2 * 2 * 2 * 8 * 2


@pytest.mark.parametrize("kv", [4, 1])
def test_under_bf16_autocast_hf_cache_holds_what_kv_cache_bytes_per_token_says(kv):
    """The trial decodes under its autocast (bf16 on CUDA): HF's cache then holds bf16 K/V, and its bytes per
    cached token equal the closed form's. CPU autocast here; the same was measured on an H200 under CUDA
    autocast (bench/measured/h200-2026-12-04/session3.log)."""
    s = gqa_spec(heads=4, kv=kv)
    model = build_model(s).eval()
    cpu_bf16 = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    with torch.no_grad(), cpu_bf16():
        cache, _ = cache_of_generate(model, windows(batch=1, tokens=6, seed=1), 8)
    tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    assert {t.dtype for t in tensors} == {torch.bfloat16}
    measured = sum(t.numel() * t.element_size() for t in tensors) / cache.get_seq_length()
    assert kv_cache_bytes_per_token(s, model, cpu_bf16) == measured == 2 * s.depth * kv * s.resolved_head_dim * 2


def test_per_token_latency_runs_on_the_grouped_model_with_hf_cache():
    model = build_model(gqa_spec(heads=4, kv=1))
    latency = generated_token_latency_ms(model, windows(batch=1), warmup_steps=0, iters=2, autocast=nullcontext)
    assert latency > 0.0


# --- Crammed BERT (ModernBERT's layers): grouping in an encoder --------------------------------------------


def bert_spec(heads=4, kv=None, depth=2, width=32) -> ModelSpec:
    return ModelSpec(
        family="crammed_bert", depth=depth, num_heads=heads, num_kv_heads=kv, embed_dim=width, mlp_dim=48,
        seq_len=16, vocab_size=VOCAB, num_classes=VOCAB,
    )  # fmt: skip


def padded_batch(lengths=(16, 11, 7)) -> dict:
    ids = windows(batch=len(lengths), seed=4)
    mask = (torch.arange(16) < torch.tensor(lengths)[:, None]).long()
    return {"input_ids": ids * mask, "attention_mask": mask}


def test_crammed_bert_num_kv_heads_equal_to_num_heads_is_modernberts_own():
    torch.manual_seed(0)
    plain = build_model(bert_spec(heads=4))
    torch.manual_seed(0)
    same = build_model(bert_spec(heads=4, kv=4))
    assert type(same.lm.model.layers[0].attn) is type(plain.lm.model.layers[0].attn)
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), same.state_dict().values(), strict=True))


@pytest.mark.parametrize("heads,kv", [(4, 2), (4, 1)])
def test_crammed_bert_kv_heads_serve_their_groups_with_rope_and_padding(heads, kv):
    """As for GPT-2: equal, on both attention paths and with padded keys masked, to the multi-head encoder
    with K/V weights copied per group; K/V parameters shrink by 2·C·(h−kv)·d per layer (no bias)."""
    torch.manual_seed(5)
    grouped = build_model(bert_spec(heads=heads, kv=kv)).double().eval()
    full = build_model(bert_spec(heads=heads)).double().eval()
    d = 32 // heads
    copy_grouped_weights(grouped, full, "Wqkv", heads, kv, d, dim=0)  # nn.Linear: (out, in)
    saved = sum(p.numel() for p in full.parameters()) - sum(p.numel() for p in grouped.parameters())
    assert saved == 2 * 2 * 32 * (heads - kv) * d
    batch = padded_batch()
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        expected = full(**batch)[real]
        for implementation in ("sdpa", "eager"):
            grouped.lm.config._attn_implementation = implementation
            assert torch.allclose(grouped(**batch)[real], expected, atol=1e-10), implementation


def test_a_grouped_trial_records_its_kv_heads_cache_bytes_and_token_latency():
    """A causal-LM trial (20 steps on MQAR) with 4 heads sharing 2 key/value heads: its record names the kv
    heads, the closed-form KV bytes (float32 on CPU) and a per-token latency measured with HF's cache."""
    from workers.trial import run_trial

    config = {
        "model": {"family": "gpt2", "depth": 2, "num_heads": 4, "num_kv_heads": 2, "embed_dim": 32, "mlp_dim": 64},
        "data": {"name": "mqar", "seq_len": 16, "mqar": {"vocab_size": 32, "num_kv_pairs": 2, "train_rows": 1000,
                                                         "val_rows": 100}},
        "train": {"epochs": 1, "max_steps": 20, "batch_size": 32, "lr": 3e-3, "warmup_steps": 2},
        "probes": {"kappa_samples": 2, "kappa_every_epochs": 0, "throughput_steps": 2, "latency_iters": 2},
        "threads": 1,
    }  # fmt: skip
    record = run_trial(config)
    assert record["status"] == "ok", record.get("error")
    assert (record["num_heads"], record["num_kv_heads"], record["head_dim"]) == (4, 2, 8)
    assert record["kv_cache_bytes_per_token"] == 2 * 2 * 2 * 8 * 4
    assert record["token_latency_ms"] > 0.0


# --- parameters and FLOPs ----------------------------------------------------------------------------------


def expected_params(s: ModelSpec) -> tuple[int, int]:
    """(total, attention) parameters of GPT-2 with grouped K/V, counted by hand (C = d_model, d = head_dim,
    M = mlp_dim): embeddings V·C + N·C; per block two LayerNorms 4C, c_attn C·(h+2kv)·d + (h+2kv)·d, c_proj
    h·d·C + C, MLP C·M + M + M·C + C; the final LayerNorm 2C; the output layer tied to the token embedding."""
    c, m, h, kv, d = s.embed_dim, s.mlp_dim, s.num_heads, s.resolved_num_kv_heads, s.resolved_head_dim
    attention = c * (h + 2 * kv) * d + (h + 2 * kv) * d + h * d * c + c
    block = 4 * c + attention + c * m + m + m * c + c
    return VOCAB * c + s.seq_len * c + s.depth * block + 2 * c, s.depth * attention


def expected_flops(s: ModelSpec) -> int:
    """Forward FLOPs of one window of N tokens (2 per multiply-add, matmuls only): per token and block,
    c_attn 2·C·(h+2kv)·d, Q Kᵀ 2·N·h·d and P V 2·N·h·d (each query head scores all N keys: grouping does not
    shrink these, and the causal mask skips nothing), c_proj 2·h·d·C, MLP 4·C·M; the output layer 2·C·V."""
    c, m, h, kv, d, n = s.embed_dim, s.mlp_dim, s.num_heads, s.resolved_num_kv_heads, s.resolved_head_dim, s.seq_len
    per_token = 2 * c * (h + 2 * kv) * d + 4 * n * h * d + 2 * h * d * c + 4 * c * m
    return n * (s.depth * per_token + 2 * c * VOCAB)


@pytest.mark.parametrize("heads,kv,head_dim", [(4, 4, None), (4, 2, None), (4, 1, None), (8, 2, 16), (16, 4, 4)])
def test_params_and_flops_match_closed_forms(heads, kv, head_dim):
    s = gqa_spec(heads=heads, kv=kv, head_dim=head_dim)
    breakdown = param_breakdown(s, build_model(s))
    total, attention = expected_params(s)
    assert (breakdown["params"], breakdown["params_attention"]) == (total, attention)
    assert forward_flops_per_sample(s) == expected_flops(s)


# --- κ of grouped causal attention ------------------------------------------------------------------------------


def direct_grouped_blocks(attention, hidden: torch.Tensor, heads: int, kv: int) -> list[np.ndarray]:
    """A = [A_1 … A_h], A_i = softmax(mask(Q_i K_{g(i)}ᵀ/√d)) V_{g(i)}, g(i) = ⌊i / (h/kv)⌋, per window, written
    out in numpy float64 from c_attn's weights."""
    x = hidden.detach().double().numpy()
    weight = attention.c_attn.weight.detach().double().numpy()
    bias = attention.c_attn.bias.detach().double().numpy()
    d = weight.shape[1] // (heads + 2 * kv)
    blocks = []
    for window in x:
        n = len(window)
        qkv = window @ weight + bias
        q, k, v = qkv[:, : heads * d], qkv[:, heads * d : (heads + kv) * d], qkv[:, (heads + kv) * d :]
        out = []
        for i in range(heads):
            j = i // (heads // kv)
            qi, kj, vj = q[:, i * d : (i + 1) * d], k[:, j * d : (j + 1) * d], v[:, j * d : (j + 1) * d]
            scores = qi @ kj.T / math.sqrt(d)
            scores[np.triu(np.ones((n, n), dtype=bool), 1)] = -np.inf  # token t sees tokens ≤ t
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            out.append(weights / weights.sum(-1, keepdims=True) @ vj)
        blocks.append(np.concatenate(out, axis=1))
    return blocks


@pytest.mark.parametrize("heads,kv,head_dim", [(4, 2, None), (8, 1, 16)])
def test_kappa_of_grouped_heads_matches_a_direct_float64_computation(heads, kv, head_dim):
    torch.manual_seed(0)
    s = gqa_spec(heads=heads, kv=kv, head_dim=head_dim)
    model = build_model(s).eval()
    inputs = {"input_ids": windows(batch=3), "attention_mask": torch.ones(3, 16, dtype=torch.long)}
    layers = kappa_layers(s, model)
    captured = capture_layer_inputs(model, layers, inputs)
    rows = kappa_per_layer(s, model, inputs)
    for layer, row in zip(layers, rows, strict=True):
        kappas = []
        for block in direct_grouped_blocks(layer.module, captured[layer.name], heads, kv):
            assert block.shape == (16, heads * s.resolved_head_dim)
            singular = np.linalg.svd(block, compute_uv=False)
            kappas.append(singular[0] / singular[-1])
        assert row["kappa"] == pytest.approx(float(np.median(kappas)), rel=1e-6)
        assert row["kappa_max"] == pytest.approx(max(kappas), rel=1e-6)


# --- the report tells grouped configs apart -------------------------------------------------------------------


def test_report_words_and_tables_tell_grouped_configs_apart():
    from sweep.analysis.report import VERDICT_COLUMNS
    from sweep.text import shape_words, short_shape, with_kv

    mha = {"depth": 2, "num_heads": 16, "head_dim": 4, "num_kv_heads": 16}
    mqa = {**mha, "num_kv_heads": 1}
    assert shape_words(mha) == "2 blocks × 16 heads of 4"
    assert shape_words(mqa) == "2 blocks × 16 heads of 4, 1 key/value head"
    assert (short_shape(mha), short_shape(mqa)) == ("2×16", "2×16/1kv")
    assert with_kv(VERDICT_COLUMNS, [mha]) == VERDICT_COLUMNS  # nothing grouped: the table as before
    columns = with_kv(VERDICT_COLUMNS, [mha, mqa], ("kv_cache_bytes_per_token",))
    assert columns[columns.index("num_heads") + 1] == "num_kv_heads" and columns[-1] == "kv_cache_bytes_per_token"
