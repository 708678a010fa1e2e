"""The sequence families (Nyströmformer and its softmax control, from HF transformers): parameters and FLOPs
against closed forms written here, κ against a float64 computation written here (padding excluded), the
rules they enforce, and a few training steps on CPU."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import capture_layer_inputs
from workers.config import ModelSpec
from workers.families.sequence import additive_mask
from workers.models import ModelConfigError, build_model, kappa_layers
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer
from workers.probes.params import param_breakdown

VOCAB, CLASSES = 17, 10


def spec(family: str, depth=2, heads=4, width=32, mlp=64, seq_len=64, **extra) -> ModelSpec:
    if family == "nystromformer":
        extra = {"num_landmarks": 8, "conv_kernel_size": 5, **extra}
    return ModelSpec(
        family=family, depth=depth, num_heads=heads, embed_dim=width, mlp_dim=mlp, num_classes=CLASSES,
        seq_len=seq_len, vocab_size=VOCAB, dropout=0.0, **extra,
    )  # fmt: skip


def probe_batch(seq_len=64, lengths=(64, 40, 17, 5), seed=0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (len(lengths), seq_len), generator=generator)
    mask = (torch.arange(seq_len)[None, :] < torch.tensor(lengths)[:, None]).long()
    return {"input_ids": ids * mask, "attention_mask": mask}


# --- parameters and FLOPs against closed forms ------------------------------------------------------------


def expected_params(s: ModelSpec) -> int:
    """HF's BERT-style layout, counted by hand: embeddings (token, position, 2 token types, LayerNorm);
    per layer q, k, v and output projections with biases, two LayerNorms, the MLP; the LRA head
    d → mlp → classes. The Nyströmformer adds 2 position slots (HF's offset) and a depthwise conv of
    kernel × 1 per head, no bias."""
    d, m, h = s.embed_dim, s.mlp_dim, s.num_heads
    nystrom = s.family == "nystromformer"
    positions = s.seq_len + 2 if nystrom else s.seq_len
    embeddings = VOCAB * d + positions * d + 2 * d + 2 * d
    attention = 4 * (d * d + d) + (h * s.conv_kernel_size if nystrom else 0)
    layer = attention + 2 * (2 * d) + (d * m + m) + (m * d + d)
    head = d * m + m + m * CLASSES + CLASSES
    return embeddings + s.depth * layer + head


def expected_flops(s: ModelSpec) -> int:
    """Forward FLOPs (2 per multiply-add) of one sequence of L positions: matmuls and convolutions only.

    Per layer: the four d×d projections (8·L·d²) and the MLP (4·L·d·m). Softmax attention: Q Kᵀ and its
    product with V (4·L²·d). Nyström attention with m' landmarks: Q K̃ᵀ, Q̃ K̃ᵀ, Q̃ Kᵀ, the product of
    kernel 3 with V and of the approximate attention with that (2·L·m'·d each, 4 of them, plus 2·m'²·d),
    the approximate attention itself (2·L·m'² per head), six Newton–Schulz steps of four m'×m' products
    (6·4·2·m'³ per head), and the depthwise conv (2·k·L·d). The head: 2·(d·m + m·C)."""
    d, m, h, L = s.embed_dim, s.mlp_dim, s.num_heads, s.seq_len
    if s.family == "nystromformer":
        lm, k = s.num_landmarks, s.conv_kernel_size
        attention = 4 * 2 * L * lm * d + 2 * lm * lm * d + 2 * L * lm * lm * h + 6 * 4 * 2 * lm**3 * h + 2 * k * L * d
    else:
        attention = 4 * L * L * d
    layer = 8 * L * d * d + attention + 4 * L * d * m
    return s.depth * layer + 2 * (d * m + m * CLASSES)


@pytest.mark.parametrize("family", ["nystromformer", "softmax_encoder"])
@pytest.mark.parametrize("depth,heads", [(1, 2), (2, 4), (3, 8)])
def test_params_and_flops_match_closed_forms(family, depth, heads):
    s = spec(family, depth=depth, heads=heads)
    model = build_model(s)
    breakdown = param_breakdown(s, model)
    assert breakdown["params"] == expected_params(s)
    assert breakdown["params_mlp"] == depth * (2 * s.embed_dim * s.mlp_dim + s.mlp_dim + s.embed_dim)
    assert forward_flops_per_sample(s) == expected_flops(s)


# --- κ against a direct float64 computation -----------------------------------------------------------------


def newton_schulz_pinv(matrix: np.ndarray, steps: int = 6) -> np.ndarray:
    """The Nyströmformer's iterative pseudo-inverse: Z₀ = Aᵀ / max column sum over the whole batch,
    Z ← ¼ Z (13 I − A Z (15 I − A Z (7 I − A Z)))."""
    eye = np.eye(matrix.shape[-1])
    z = np.swapaxes(matrix, -1, -2) / matrix.sum(axis=-2).max()
    for _ in range(steps):
        az = matrix @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def arr(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().double().numpy()


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def direct_nystrom_blocks(attention, hidden: torch.Tensor, mask: torch.Tensor, landmarks: int) -> list[np.ndarray]:
    """The Nyströmformer's attention output per head, written out in numpy float64 from the weights."""
    x = arr(hidden)
    weights = {
        n: (arr(getattr(attention, n).weight), arr(getattr(attention, n).bias)) for n in ("query", "key", "value")
    }
    heads, hd = attention.num_attention_heads, attention.attention_head_size
    batch, length, _ = x.shape

    def project(name):
        w, b = weights[name]
        return (x @ w.T + b).reshape(batch, length, heads, hd).transpose(0, 2, 1, 3)  # (B, h, L, d)

    q, k, v = project("query") / hd**0.25, project("key") / hd**0.25, project("value")
    segments = length // landmarks
    q_land = q.reshape(batch, heads, landmarks, segments, hd).mean(axis=3)
    k_land = k.reshape(batch, heads, landmarks, segments, hd).mean(axis=3)
    padding = np.where(mask.numpy()[:, None, None, :] > 0, 0.0, np.finfo(np.float64).min)
    kernel_1 = softmax(q @ np.swapaxes(k_land, -1, -2))
    kernel_2 = softmax(q_land @ np.swapaxes(k_land, -1, -2))
    kernel_3 = softmax(q_land @ np.swapaxes(k, -1, -2) + padding)
    context = kernel_1 @ newton_schulz_pinv(kernel_2) @ (kernel_3 @ v)
    conv = arr(attention.conv.weight)[:, 0, :, 0]  # (h, kernel)
    pad = conv.shape[1] // 2
    padded = np.pad(v, ((0, 0), (0, 0), (pad, pad), (0, 0)))
    for head in range(heads):  # depthwise convolution over positions, per channel of the head
        for offset in range(conv.shape[1]):
            context[:, head] += conv[head, offset] * padded[:, head, offset : offset + length]
    blocks = context.transpose(0, 2, 1, 3).reshape(batch, length, heads * hd)
    return [blocks[i, mask[i].bool().numpy()] for i in range(batch)]


def direct_softmax_blocks(attention, hidden: torch.Tensor, mask: torch.Tensor) -> list[np.ndarray]:
    """softmax(Q_i K_iᵀ/√d) V_i over each sample's real tokens, concatenated over heads, in numpy float64."""
    heads, hd = attention.num_attention_heads, attention.attention_head_size
    blocks = []
    for sample, keep in zip(arr(hidden), mask.bool().numpy(), strict=True):
        x = sample[keep]
        q, k, v = (
            (x @ arr(getattr(attention, n).weight).T + arr(getattr(attention, n).bias))
            .reshape(len(x), heads, hd).transpose(1, 0, 2)
            for n in ("query", "key", "value")
        )  # fmt: skip
        out = softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(hd)) @ v
        blocks.append(out.transpose(1, 0, 2).reshape(len(x), heads * hd))
    return blocks


def condition(block: np.ndarray) -> float:
    singular = np.linalg.svd(block, compute_uv=False)
    return float(singular[0] / singular[-1])


@pytest.mark.parametrize("family", ["nystromformer", "softmax_encoder"])
def test_kappa_matches_a_direct_float64_computation_over_real_tokens(family):
    torch.manual_seed(0)
    s = spec(family, heads=4, width=32)
    model = build_model(s).eval()
    batch = probe_batch()
    layers = kappa_layers(s, model)
    captured = capture_layer_inputs(model, layers, batch)
    rows = kappa_per_layer(s, model, batch)
    assert [row["layer_name"] for row in rows] == [layer.name for layer in layers]
    for layer, row in zip(layers, rows, strict=True):
        hidden = captured[layer.name]
        if family == "nystromformer":
            blocks = direct_nystrom_blocks(layer.module, hidden, batch["attention_mask"], s.num_landmarks)
        else:
            blocks = direct_softmax_blocks(layer.module, hidden, batch["attention_mask"])
        assert [len(b) for b in blocks] == [64, 40, 17, 5]  # N is each sample's real length
        kappas = [condition(b) for b in blocks]
        assert row["kappa"] == pytest.approx(float(np.median(kappas)), rel=1e-6)
        assert row["kappa_max"] == pytest.approx(max(kappas), rel=1e-6)


def test_the_additive_mask_blocks_padded_keys():
    mask = torch.tensor([[1, 1, 0]])
    additive = additive_mask(mask, torch.float32)
    assert additive.shape == (1, 1, 1, 3)
    probabilities = F.softmax(torch.zeros(1, 1, 1, 3) + additive, dim=-1)
    assert probabilities[0, 0, 0].tolist() == pytest.approx([0.5, 0.5, 0.0])


# --- rules ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["nystromformer", "softmax_encoder"])
def test_head_dim_is_derived_and_a_separate_one_names_the_family(family):
    with pytest.raises(ModelConfigError, match=rf"{family}'s head_dim is embed_dim / num_heads"):
        build_model(spec(family, heads=4, width=32, head_dim=16))


def test_sequence_families_need_token_data_and_image_families_refuse_it():
    with pytest.raises(ModelConfigError, match="must give seq_len and vocab_size"):
        build_model(ModelSpec(family="softmax_encoder", depth=1, num_heads=2, embed_dim=16, mlp_dim=32))
    with pytest.raises(ModelConfigError, match="the vit family does not take seq_len"):
        build_model(ModelSpec(family="vit", depth=1, num_heads=2, embed_dim=16, mlp_dim=32, seq_len=8, vocab_size=5))
