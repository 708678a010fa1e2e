"""The conditioning interventions (workers/conditioning.py): each formula against an independent float64
computation, causality, the parameter and FLOP counts, their effect on κ in training, and the families that
refuse them."""

import numpy as np
import pytest
import torch

from workers.conditioning import log_kappa, orthogonality_penalty, penalty, precondition
from workers.config import ModelSpec
from workers.families.vit import self_attention_block
from workers.models import build_model, build_on_meta, variant_spec
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import kappa_per_layer, summarise_kappa
from workers.train import make_context, train_step

EPS = 1e-12


def numpy_precondition(a: np.ndarray, causal: bool = False, keep: np.ndarray | None = None) -> np.ndarray:
    """A · s · diag(1/r) for one (N, D) matrix, written out row by row from the docstring's formula."""
    out = np.empty_like(a)
    for t in range(a.shape[0]):
        rows = a[: t + 1] if causal else (a[keep] if keep is not None else a)
        r = np.sqrt((rows**2).mean(axis=0) + EPS)
        s = np.sqrt((r**2).mean())
        out[t] = a[t] * s / r
    return out


def vit_spec(**overrides) -> ModelSpec:
    shape = dict(family="vit", depth=2, num_heads=4, embed_dim=32, mlp_dim=64, patch_size=2, img_size=8)
    return ModelSpec(**{**shape, "in_chans": 1, "num_classes": 10, **overrides})


def gpt2_spec(**overrides) -> ModelSpec:
    shape = dict(family="gpt2", depth=2, num_heads=4, embed_dim=32, mlp_dim=64, seq_len=12, vocab_size=20)
    return ModelSpec(**{**shape, **overrides})


def encoder_spec(**overrides) -> ModelSpec:
    shape = dict(family="softmax_encoder", depth=2, num_heads=4, embed_dim=32, mlp_dim=64, seq_len=10)
    return ModelSpec(**{**shape, "vocab_size": 12, "num_classes": 10, "dropout": 0.0, **overrides})


# --- the preconditioner -------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_the_preconditioner_is_its_formula(causal):
    a = np.random.default_rng(0).normal(size=(3, 7, 5)) * np.array([0.1, 1, 10, 3, 0.01])
    got = precondition(torch.from_numpy(a), causal=causal).numpy()
    want = np.stack([numpy_precondition(sample, causal) for sample in a])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_padded_preconditioner_uses_real_tokens_only():
    a = np.random.default_rng(1).normal(size=(2, 6, 4))
    keep = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=bool)
    got = precondition(torch.from_numpy(a), mask=torch.from_numpy(keep)).numpy()
    want = np.stack([numpy_precondition(sample, keep=k) for sample, k in zip(a, keep, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_vit_projection_receives_the_preconditioned_block():
    """What ``proj`` receives in the model's own forward equals the formula applied to A computed apart."""
    torch.manual_seed(0)
    spec = vit_spec(conditioning="preconditioned")
    model = build_model(spec).eval()
    attn = model.blocks[0].attn
    seen = {}
    attn.register_forward_pre_hook(lambda _m, args: seen.update(tokens=args[0]))
    attn.proj.register_forward_pre_hook(lambda _m, args: seen.update(received=args[0]))  # runs after ours
    with torch.no_grad():
        model(torch.randn(3, 1, 8, 8))
    with torch.no_grad():
        block = self_attention_block(attn, seen["tokens"], 3)[:, 0].numpy()  # float64 A, (3, N, h·d)
    want = np.stack([numpy_precondition(sample) for sample in block])
    np.testing.assert_allclose(seen["received"].double().numpy(), want, rtol=1e-4, atol=1e-6)


def test_the_gpt2_preconditioner_does_not_see_the_future():
    torch.manual_seed(0)
    model = build_model(gpt2_spec(conditioning="preconditioned")).eval()
    ids = torch.randint(0, 20, (2, 12))
    changed = ids.clone()
    changed[:, -1] = (ids[:, -1] + 1) % 20
    with torch.no_grad():
        before, after = model(ids), model(changed)
    torch.testing.assert_close(before[:, :-1], after[:, :-1], rtol=0, atol=1e-6)
    assert not torch.allclose(before[:, -1], after[:, -1])


def test_the_probe_measures_the_block_the_projection_receives():
    """κ with the preconditioner equals κ of the preconditioned float64 block, and differs from plain A's."""
    torch.manual_seed(0)
    spec = vit_spec(conditioning="preconditioned", depth=1)
    model = build_model(spec)
    images = torch.randn(4, 1, 8, 8)
    seen = {}
    model.blocks[0].attn.register_forward_pre_hook(lambda _m, args: seen.update(tokens=args[0]))
    row = kappa_per_layer(spec, model, images)[0]
    with torch.no_grad():
        block = self_attention_block(model.blocks[0].attn, seen["tokens"], 4)[:, 0].numpy()
    kappas = [np.linalg.cond(numpy_precondition(sample)) for sample in block]
    plain = [np.linalg.cond(sample) for sample in block]
    assert row["kappa"] == pytest.approx(np.median(kappas), rel=1e-9)
    assert row["kappa"] < 0.8 * np.median(plain)


# --- the penalties ------------------------------------------------------------------------------------------


def numpy_orthogonality(a: np.ndarray) -> float:
    gram = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
    m = min(a.shape)
    return float(np.sum((gram / (np.trace(gram) / m) - np.eye(m)) ** 2) / m)


def numpy_log_kappa(a: np.ndarray) -> float:
    s = np.linalg.svd(a, compute_uv=False)
    return float(np.log(s[0] / s[-1]))


@pytest.mark.parametrize("shape", [(2, 5, 8), (2, 8, 5)])
def test_each_penalty_is_its_formula(shape):
    a = np.random.default_rng(2).normal(size=shape)
    ortho = orthogonality_penalty(torch.from_numpy(a)).numpy()
    logk = log_kappa(torch.from_numpy(a)).numpy()
    np.testing.assert_allclose(ortho, [numpy_orthogonality(x) for x in a], rtol=1e-10)
    np.testing.assert_allclose(logk, [numpy_log_kappa(x) for x in a], rtol=1e-10)
    q, _ = np.linalg.qr(a[0] if shape[1] > shape[2] else a[0].T)  # orthonormal columns: κ = 1
    assert orthogonality_penalty(torch.from_numpy(q)).item() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("kind", ["orthogonality", "kappa_penalty"])
def test_the_model_penalty_is_lambda_times_the_mean_over_layers_and_real_tokens(kind):
    """softmax_encoder with padding: λ · mean over layers and samples, each sample over its real tokens."""
    torch.manual_seed(0)
    model = build_model(encoder_spec(conditioning=kind, conditioning_weight=0.5)).train()
    blocks = []
    for layer in model.encoder.encoder.layer:
        layer.attention.output.dense.register_forward_pre_hook(lambda _m, args: blocks.append(args[0].detach()))
    ids = torch.randint(1, 12, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[0, 6:] = mask[2, 3:] = 0
    model(input_ids=ids, attention_mask=mask)
    got = penalty(model)
    function = numpy_orthogonality if kind == "orthogonality" else numpy_log_kappa
    keep = mask.bool().numpy()
    per_layer = [np.mean([function(b[k].double().numpy()) for b, k in zip(x, keep, strict=True)]) for x in blocks]
    assert got.item() == pytest.approx(0.5 * np.mean(per_layer), rel=1e-4)
    assert got.requires_grad and penalty(model) is None  # read once, then forgotten


def kappa_after_training(kind: str, steps: int = 30) -> tuple[float, float]:
    """κ of a tiny ViT after ``steps`` AdamW steps on fixed random data, same seed for every kind; also the
    last step's task loss."""
    torch.manual_seed(0)
    extra = {} if kind == "none" else {"conditioning": kind, "conditioning_weight": 1.0}
    spec = vit_spec(num_heads=1, **extra)
    model = build_model(spec)
    from workers.config import TrainSpec

    ctx = make_context(model, TrainSpec(lr=3e-3, warmup_steps=0, batch_size=32), torch.device("cpu"), steps)
    generator = torch.Generator().manual_seed(1)
    images, labels = torch.randn(32, 1, 8, 8, generator=generator), torch.randint(0, 10, (32,), generator=generator)
    for _ in range(steps):
        loss = train_step(ctx, images, labels)
    return summarise_kappa(kappa_per_layer(spec, model, images[:8]))["kappa_mean"], loss.item()


@pytest.fixture
def one_thread():
    """Tiny matmuls: one thread is ~40× faster than two on a shared 2-core machine (measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_few_steps_with_either_penalty_lower_kappa(one_thread):
    """Measured, not assumed: 30 steps, λ = 1, one head of 32 (17 tokens). Measured here: κ 3.7e8 without,
    5.5e7 with the orthogonality penalty, 2.6e4 with the log-κ penalty."""
    plain, _ = kappa_after_training("none")
    for kind in ("orthogonality", "kappa_penalty"):
        kappa, loss = kappa_after_training(kind)
        assert kappa < plain / 2, (kind, kappa, plain)
        assert np.isfinite(loss)


# --- what the interventions cost, and who takes them --------------------------------------------------------


@pytest.mark.parametrize("kind", ["preconditioned", "orthogonality", "kappa_penalty"])
def test_parameters_and_flops_are_unchanged(kind):
    def params(model):
        return sum(p.numel() for p in model.parameters())

    import timm

    with torch.device("meta"):
        timm_tiny = params(timm.create_model("vit_tiny_patch16_224", pretrained=False))
    assert params(build_on_meta(variant_spec("vit_tiny_patch16_224", conditioning=kind))) == timm_tiny == 5_717_416
    for make in (vit_spec, gpt2_spec, encoder_spec):
        assert params(build_model(make(conditioning=kind))) == params(build_model(make()))
    from transformers import GPT2LMHeadModel

    from workers.families.gpt2 import gpt2_config

    hf_own = params(GPT2LMHeadModel(gpt2_config(gpt2_spec())))  # HF's GPT-2 of that shape, built directly
    assert params(build_model(gpt2_spec(conditioning=kind))) == hf_own
    # ViT, 17 tokens of width 32, 4 heads of 8, MLP 64, one channel of 8×8 in patches of 2, 10 classes:
    # per block qkv 2·17·32·96, scores and values 2·(2·17·17·32), proj 2·17·32·32, MLP 2·(2·17·32·64);
    # patch embedding 2·16·32·4, classifier 2·32·10. The preconditioner's elementwise ops are not counted.
    block = 2 * 17 * 32 * 96 + 2 * 2 * 17 * 17 * 32 + 2 * 17 * 32 * 32 + 2 * 2 * 17 * 32 * 64
    assert forward_flops_per_sample(vit_spec(conditioning=kind)) == 2 * block + 2 * 16 * 32 * 4 + 2 * 32 * 10


def test_a_family_that_does_not_take_conditioning_is_reported_by_sweep_plan(tmp_path, capsys):
    from sweep.cli import main

    space = tmp_path / "xcit_conditioned.yaml"
    space.write_text(
        "question: can xcit be conditioned?\n"
        "model: {family: xcit, embed_dim: 16, mlp_dim: 32, patch_size: 8}\n"
        "axes: {depth: [1], num_heads: [2], conditioning: [none, preconditioned]}\n"
        "baseline: {depth: 1, num_heads: 2}\nseeds: [0]\ndata: {name: digits}\n"
    )
    assert main(["plan", str(space)]) == 2
    err = capsys.readouterr().err
    assert "model.conditioning" in err and "the xcit family does not take conditioning" in err
