"""The paper's families (XCiT, TNT, DaViT, VOLO besides ViT/DeiT): each builds what it is asked, refuses what
it cannot take, measures κ exactly as its module docstring defines it, trains on CPU, and its spaces set the
planned parameter counts beside the published ones."""

import statistics

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from sweep.plan.plan import compare_published, make_plan
from sweep.space.loader import load_space, shipped_spaces
from sweep.space.shapes import measure_shape
from workers.config import ModelSpec
from workers.models import (
    FAMILIES,
    VARIANTS,
    build_model,
    build_on_meta,
    kappa_layers,
    set_fused_attention,
    variant_spec,
)
from workers.probes.flops import forward_flops_per_sample
from workers.probes.kappa import condition_number, kappa_per_layer
from workers.probes.params import count_params, param_breakdown
from workers.trial import run_trial

IMAGE_FAMILIES = sorted(name for name, family in FAMILIES.items() if family.modality == "image")

# The six image families' examples, pinned: tokens the swept attention sees at 32 px (patches (+ class token),
# or the swept stage's map) and the attention kinds κ is probed on. A new family needs no entry here: the
# test over FAMILIES at the end of this file covers every family from its own example.
PINNED = {
    "vit": (17, {"self"}),
    "deit": (17, {"self"}),
    "xcit": (16, {"xca"}),
    "tnt": (17, {"inner", "outer"}),
    "davit": (2 * 2, {"window", "channel"}),
    "volo": (2 * 2, {"outlook", "self"}),
}


def small_spec(family: str, **overrides) -> ModelSpec:
    """The family's own example (digits at 32 px, one channel: seconds on a CPU), with ``overrides``."""
    return FAMILIES[family].example_spec(**overrides)


@pytest.mark.parametrize("family", sorted(PINNED))
def test_the_examples_see_the_pinned_tokens_and_attention_kinds(family):
    spec = small_spec(family)
    tokens, kinds = PINNED[family]
    assert FAMILIES[family].num_tokens(spec) == tokens
    assert {layer.kind for layer in kappa_layers(spec, build_model(spec))} == kinds


# --- κ against a direct computation ------------------------------------------------------------------------


def projection_inputs(model, layers, images):
    """Each probed layer's A as its own forward computes it: the input of the layer's output projection."""
    captured = {}
    handles = []
    for layer in layers:
        attention = layer.module.attn if layer.kind == "window" else layer.module  # window: hooked on its block
        handles.append(
            attention.proj.register_forward_pre_hook(
                lambda _m, args, name=layer.name: captured.setdefault(name, args[0].detach())
            )
        )
    with torch.no_grad():
        model(images)
    for handle in handles:
        handle.remove()
    return captured


def as_blocks(kind: str, direct: torch.Tensor, n_images: int) -> torch.Tensor:
    """The projection's input (whatever layout the layer uses) as (images, sub-blocks, N, D)."""
    if kind in ("outlook", "self") and direct.dim() == 4:  # VOLO keeps the (B, H, W, C) map
        return direct.flatten(1, 2).unsqueeze(1)
    return direct.reshape(n_images, -1, direct.shape[-2], direct.shape[-1])


def randomise_biases(model):
    """At init every bias is 0, and LayerNorm's output is centred over channels, so where a block has more
    tokens than channels (DaViT's first stages here) its A has rank below C and κ is float noise (~1e16),
    which cannot be compared. Random biases make every block full rank."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype) * 0.5)


# DaViT at 224 px: every stage's map (56, 28, 14, 7) is whole 7×7 windows, so the projection's input has
# no padding rows to drop and equals the probe's A exactly.
DIRECT_CASES = [(family, 32) for family in PINNED if family != "davit"]
DIRECT_CASES.append(pytest.param("davit", 224, marks=pytest.mark.slow))  # ~20 s on 2 cores


@pytest.mark.parametrize(("family", "img_size"), DIRECT_CASES)
def test_kappa_equals_a_direct_computation_from_the_layers_own_forward(family, img_size):
    torch.manual_seed(0)
    spec = small_spec(family, img_size=img_size)
    model = build_model(spec).double().eval()  # float64: ill-conditioned blocks must agree closely
    randomise_biases(model)
    set_fused_attention(model, True)  # the probe must not need attention weights materialised
    images = torch.randn(3, 1, img_size, img_size, dtype=torch.float64)

    layers = kappa_layers(spec, model)
    assert {layer.kind for layer in layers} == PINNED[family][1]
    direct = projection_inputs(model, layers, images)
    rows = kappa_per_layer(spec, model, images)
    assert [row["layer_name"] for row in rows] == [layer.name for layer in layers]
    for layer, row in zip(layers, rows, strict=True):
        inputs = {}
        hook = layer.module.register_forward_pre_hook(lambda _m, args, seen=inputs: seen.setdefault("x", args[0]))
        with torch.no_grad():
            model(images)
            hook.remove()
            ours = layer.block(layer.module, inputs["x"], len(images))
        theirs = as_blocks(layer.kind, direct[layer.name], len(images))
        ours = ours if isinstance(ours, torch.Tensor) else torch.cat(ours, dim=1)
        assert torch.allclose(ours, theirs, rtol=1e-9, atol=1e-12), layer.name

        per_image = [statistics.median(k) for k in condition_number(theirs).tolist()]
        assert row["attention"] == layer.kind
        expected = {"kappa": statistics.median(per_image), "kappa_max": max(per_image)}
        for key, value in expected.items():
            if value < 1e8:
                assert row[key] == pytest.approx(value, rel=1e-6), (layer.name, key)
            else:  # σ_min near float64 noise (DaViT's channel softmax saturates over 3,136 tokens): digits differ
                assert row[key] >= 1e8, (layer.name, key)


# --- what a family cannot take ----------------------------------------------------------------------------


def test_a_space_asking_a_family_for_what_it_cannot_take_fails_validation(tmp_path, capsys):
    from sweep.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(
        "question: q\nmodel: {family: xcit, embed_dim: 32, mlp_dim: 64, patch_size: 4}\n"
        "axes: {depth: [2], num_heads: [4], head_dim: [4]}\nhead_dim_rule: fixed_head_dim\n"
        "baseline: {depth: 2}\ndata: {name: digits, img_size: 32}\n"
    )
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "model.head_dim: xcit's head_dim" in err and "model.patch_size" in err


# --- training -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", IMAGE_FAMILIES)
def test_every_family_trains_a_few_steps_on_cpu_and_records_kappa(family):
    spec = small_spec(family)  # the digits at 32 px: 1 channel, 10 classes, as every image example
    config = {
        "model": spec.model_dump(exclude_none=True),
        "data": {"name": "digits", "img_size": 32},
        "train": {"epochs": 1, "max_steps": 3, "batch_size": 32, "lr": 1e-3, "warmup_steps": 1},
        "probes": {"kappa_samples": 2, "throughput_steps": 1, "latency_iters": 1, "memory": False},
        "seed": 0,
        "threads": 1,
    }
    record = run_trial(config)
    assert record["status"] == "ok", record.get("error")
    assert record["steps_run"] == 3 and record["top1"] is not None
    built = build_model(spec)
    assert record["num_tokens"] == FAMILIES[family].num_tokens(spec)
    assert {row["attention"] for row in record["kappa"]} == {layer.kind for layer in kappa_layers(spec, built)}
    last = [row for row in record["kappa"] if row["epoch"] == record["epochs_run"]]
    assert record["kappa_mean"] == pytest.approx(sum(row["kappa"] for row in last) / len(last))
    assert record["params"] == sum(p.numel() for p in built.parameters() if p.requires_grad)
    assert record["params_attention"] > 0 and record["params_mlp"] > 0


# --- the published rows ----------------------------------------------------------------------------------


def spaces_with_published_rows() -> list[str]:
    return [name for name, path in shipped_spaces().items() if load_space(str(path))[1].published]


def test_the_five_clean_rows_have_spaces_with_published_counts():
    assert {"xcit_m", "xcit_l", "tnt_b", "davit_b", "davit_l"} <= set(spaces_with_published_rows())


@pytest.mark.parametrize("name", spaces_with_published_rows())
def test_published_counts_are_reproduced_within_1_percent_or_the_space_says_why(name):
    plan = make_plan(*load_space(name, "paper"))
    rows = compare_published(plan)
    assert rows and all(row["planned_params_m"] is not None for row in rows), "a published shape is not planned"
    for row in rows:
        # A row either matches or carries its explanation; never both, so an explanation cannot go stale.
        assert row["reproduced"] == (row["mismatch"] is None), row


def test_published_counts_as_measured():
    """The figures the space files quote (ImageNet shape, meta-device counts)."""
    planned = {
        (name, row["label"]): round(row["planned_params_m"], 2)
        for name in ("xcit_m", "xcit_l", "tnt_b", "davit_b", "davit_l")
        for row in compare_published(make_plan(*load_space(name, "paper")))
    }
    assert planned == {
        ("xcit_m", "XCiT-M"): 84.40,
        ("xcit_m", "XCiT-M lean"): 46.40,
        ("xcit_l", "XCiT-L"): 189.10,
        ("xcit_l", "XCiT-L lean"): 103.79,
        ("tnt_b", "TNT-B"): 65.43,
        ("tnt_b", "TNT-B lean"): 44.02,
        ("davit_b", "DaViT-B"): 87.95,
        ("davit_b", "DaViT-B lean"): 62.65,
        ("davit_l", "DaViT-L"): 196.81,
        ("davit_l", "DaViT-L lean"): 139.99,
    }


def test_sweep_plan_prints_published_counts_beside_planned_ones_and_the_swept_stage(capsys):
    from sweep.cli import main

    assert main(["plan", "xcit_l"]) == 0
    out = capsys.readouterr().out
    assert (
        "published XCiT-L lean (depth 12, num_heads 24): 103.8M, top1 82.4, planned 103.79M (-0.0%): reproduced" in out
    )
    assert main(["plan", "tnt_b"]) == 0
    out = capsys.readouterr().out
    assert (
        "published TNT-B lean (depth 8, num_heads 16): 30.9M, top1 82.3, planned 44.02M (+42.4%): NOT reproduced" in out
    )
    assert "why: At d_model 640" in out
    assert main(["plan", "davit_b", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "stage 3's (*); the others keep depths [1, 1, *, 1]" in out
    assert "published DaViT-B" not in out  # the smoke grid is not ImageNet-shaped: it drops the rows


@pytest.mark.parametrize("family", IMAGE_FAMILIES)
def test_the_swept_mlp_width_is_exact(family):
    from workers.models import mlp_layers

    spec = small_spec(family, mlp_dim=100)  # 100 / 32 is not a round ratio
    widths = [module.fc1.out_features for _, module in mlp_layers(spec, build_model(spec))]
    assert widths.count(100) >= spec.depth


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_planned_counts_from_two_depths_equal_a_full_count(name):
    """The planner counts at depths 1 and 2 and extends linearly; a whole model must give the same."""
    spec = variant_spec(name)
    fields = spec.model_dump(exclude_none=True)
    model = build_on_meta(spec)
    assert measure_shape(fields) == (count_params(model), forward_flops_per_sample(spec, model))


# --- every registered family, from its own example ---------------------------------------------------------


def counted_forward_flops(model: torch.nn.Module, inputs) -> int:
    """torch's FLOP counter on one real forward on the CPU, attention through SDPA's math backend (plain
    matmuls, which the counter counts), independent of the probe's meta-device build and its switch to
    unfused attention."""
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), counter, torch.no_grad():
        model(inputs) if isinstance(inputs, torch.Tensor) else model(**inputs)
    return int(counter.get_total_flops())


def random_example_input(family, spec: ModelSpec):
    """One sample of the family's input, with random values: an image (example_input's empty() holds junk), or
    token ids drawn from the vocabulary, every position real."""
    generator = torch.Generator().manual_seed(0)
    inputs = family.example_input(spec, "cpu")
    if isinstance(inputs, torch.Tensor):
        return torch.randn(inputs.shape, generator=generator)
    ids = torch.randint(1, spec.vocab_size, inputs["input_ids"].shape, generator=generator)
    return {**inputs, "input_ids": ids}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_builds_its_example_counts_it_probes_it_and_says_where_a_is(name):
    """What conditioning and the probes need of a family is on ``Family``: its example builds with no
    problem; its parameter count equals the family's independent ``reference_params`` (the upstream
    library's stock model: timm's registered model or HF's model class, with a head added or dropped by hand)
    and its parts sum to it; the probe's FLOPs per sample equal torch's counter on a real forward of one
    sample (one, not a batch divided: XCiT computes its positional encoding once per batch); κ is measured
    on every layer it names; and its output projections (when it has them; only then may it take
    ``conditioning``) receive the block A, (B, N, num_heads · head_dim), once per layer."""
    family = FAMILIES[name]
    spec = family.example_spec()
    assert family.problems(spec) == []
    torch.manual_seed(0)
    model = build_model(spec).eval()
    parts = param_breakdown(spec, model)
    assert parts["params"] == family.reference_params(spec) == sum(p.numel() for p in model.parameters()) > 0
    assert parts["params"] == parts["params_attention"] + parts["params_mlp"] + parts["params_embed_head"]
    inputs = random_example_input(family, spec)
    assert forward_flops_per_sample(spec) == counted_forward_flops(model, inputs) > 0
    rows = kappa_per_layer(spec, model, inputs)
    assert len(rows) == len(kappa_layers(spec, model)) > 0
    assert ("conditioning" in family.accepts) == (family.output_projections is not None)
    if family.output_projections is None:
        return
    seen = []
    hooks = [
        p.register_forward_pre_hook(lambda _m, args: seen.append(args[0].shape))
        for p in family.output_projections(model)
    ]
    with torch.no_grad():
        model(inputs) if isinstance(inputs, torch.Tensor) else model(**inputs)
    for hook in hooks:
        hook.remove()
    width = spec.num_heads * (spec.head_dim or spec.embed_dim // spec.num_heads)
    assert len(seen) == spec.depth and all(shape[-1] == width and shape[0] == 1 for shape in seen)
