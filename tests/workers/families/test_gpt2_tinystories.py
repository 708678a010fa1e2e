"""The gpt2_tinystories space: the paper's counts against counts made independently (HF's own GPT-2 where
its heads divide d_model, a closed form where they do not), every profile plans, the floor_d_model rule,
the planning vocabulary, the smoke profile through `sweep run`, and planted loss rows imported into the
space give the depth edge they were planted with."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from sweep.analysis.sql import run_query
from sweep.cli import main
from sweep.plan.plan import make_plan
from sweep.results.importer import import_file
from sweep.space.loader import load_space
from tests.helpers import assert_tables_agree, run_smoke_profile, trial_row, write_csv
from workers.data.registry import data_spec

VOCAB, POSITIONS, WIDTH, MLP = 50257, 512, 512, 2048


def untied_gpt2_params(depth: int, heads: int, head_dim: int) -> int:
    """GPT-2 counted by hand with an output layer of its own: token and position embeddings; per block two
    LayerNorms, c_attn (d → 3w) and c_proj (w → d) with biases, the MLP (d → m → d) with biases; the final
    LayerNorm; the output layer (d → vocab, no bias). w = heads × head_dim."""
    d, m, w = WIDTH, MLP, heads * head_dim
    block = 2 * d + (d * 3 * w + 3 * w) + (w * d + d) + 2 * d + (d * m + m) + (m * d + d)
    return VOCAB * d + POSITIONS * d + depth * block + 2 * d + d * VOCAB


def hf_untied_gpt2_params(depth: int, heads: int) -> int:
    config = GPT2Config(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=WIDTH, n_layer=depth, n_head=heads,
                        n_inner=MLP, tie_word_embeddings=False)  # fmt: skip
    with torch.device("meta"):
        return sum(p.numel() for p in GPT2LMHeadModel(config).parameters())


def planned(profile: str | None = None):
    name, space, chosen = load_space("gpt2_tinystories", profile)
    return space, make_plan(name, space, chosen)


def test_paper_counts_are_reproduced_and_counted_independently(capsys):
    _, plan = planned()
    params = {(c.shape.depth, c.shape.num_heads): c.params for c in plan.configs}
    head_dims = {(c.shape.depth, c.shape.num_heads): c.shape.head_dim for c in plan.configs}
    assert head_dims == {(12, 12): 42, (4, 12): 42, (12, 16): 32, (4, 16): 32}
    assert params[(4, 16)] == hf_untied_gpt2_params(4, 16) == untied_gpt2_params(4, 16, 32)
    assert params[(12, 16)] == hf_untied_gpt2_params(12, 16)
    assert params[(12, 12)] == untied_gpt2_params(12, 12, 42) == 89_358_048
    assert abs(params[(12, 12)] / 89.0e6 - 1) < 0.01 and abs(params[(4, 16)] / 64.0e6 - 1) < 0.01
    assert main(["plan", "gpt2_tinystories"]) == 0
    out = capsys.readouterr().out
    assert "published GPT-2 12 × 12 (depth 12, num_heads 12): 89.0M, planned 89.36M (+0.4%): reproduced" in out
    assert "published GPT-2 4 × 16 (depth 4, num_heads 16): 64.0M, planned 64.34M (+0.5%): reproduced" in out


@pytest.mark.parametrize("profile", ["paper", "width", "breaks", "smoke"])
def test_every_profile_validates_and_plans(profile):
    space, plan = planned(profile)
    assert plan.configs and sum(c.is_baseline for c in plan.configs) == 1
    assert space.metric.name == "val_loss" and space.metric.mode == "min"


def test_width_profile_widens_attention_with_heads():
    _, plan = planned("width")
    widths = {c.shape.num_heads: c.shape.attn_dim for c in plan.configs}
    assert widths == {12: 384, 16: 512, 24: 768}
    assert {c.shape.head_dim for c in plan.configs} == {32}


def test_floor_d_model_rounds_head_dim_down_and_drops_impossible_heads():
    name, space, profile = load_space("gpt2_tinystories", "breaks")
    space = space.model_copy(update={"axes": space.axes.model_copy(update={"num_heads": [12, 600]})})
    plan = make_plan(name, space, profile)
    assert {c.shape.head_dim for c in plan.configs} == {42}
    assert any("num_heads=600 > embed_dim=512" in r.reason for r in plan.removed)


def test_planning_vocabulary_comes_from_the_space_until_the_tokenizer_is_there(tmp_path):
    from tokenizers import Tokenizer, models

    data = {"name": "tinystories", "seq_len": 8, "root": str(tmp_path), "text": {"tokenizer": "tokenizer.json"}}
    assert (data_spec(**{**data, "text": {**data["text"], "expected_vocab_size": 50257}})).vocab_size() == 50257
    Tokenizer(models.WordLevel({"<|endoftext|>": 0, "a": 1, "b": 2}, unk_token="a")).save(
        str(tmp_path / "tokenizer.json")
    )
    assert (data_spec(**data)).vocab_size() == 3
    with pytest.raises(ValueError, match=r"has 3 ids, but the space plans with text\.expected_vocab_size=50257"):
        (data_spec(**{**data, "text": {**data["text"], "expected_vocab_size": 50257}})).vocab_size()


# Planted truth in validation loss (nats), baseline 12 blocks × 12 heads at 1.50, tolerance 0.02 (the space's):
#   12 heads: holds at 4 (+0.01), breaks at 2 (+0.10)     16 heads: holds down to 2 (+0.015), breaks at 1
#   32 heads: breaks at 4 already (+0.06)
PLANTED = {(12, 12): 1.50, (4, 12): 1.51, (2, 12): 1.60, (1, 12): 1.90, (12, 16): 1.49, (4, 16): 1.49,
           (2, 16): 1.515, (1, 16): 1.70, (12, 32): 1.50, (4, 32): 1.56, (2, 32): 1.70, (1, 32): 2.00}  # fmt: skip


def test_planted_loss_rows_imported_into_the_space_give_its_depth_edge(tmp_path):
    rows = []
    for (depth, heads), loss in PLANTED.items():
        for seed in range(3):
            row = trial_row("gpt2_tinystories", depth, heads, seed, None, width=WIDTH, baseline=(12, 12))
            del row["top1"]
            rows.append({**row, "family": "gpt2", "mlp_dim": MLP, "val_loss": loss + (seed - 1) * 0.001})
    results = tmp_path / "results"
    assert import_file(write_csv(tmp_path / "planted.csv", rows), results) == {"gpt2_tinystories": 36}
    _, values = run_query(results, "SELECT num_heads, holds_down_to_depth, breaks_at_depth FROM depth_edge")
    assert {row[0]: (row[1], row[2]) for row in values} == {12: (4, 2), 16: (2, 1), 32: (12, 4)}
    _, values = run_query(results, "SELECT DISTINCT metric, metric_mode, tolerance FROM vs_baseline")
    assert values == [("val_loss", "min", 0.02)]


@pytest.mark.slow
def test_smoke_profile_runs_through_the_cli(tmp_path, local_ray, capfd):
    """`make sweep SPACE=gpt2_tinystories PROFILE=smoke` as users run it: ok rows with the loss as score,
    κ, throughput and the per-token latency of generation."""
    results = tmp_path / "results"
    trials = run_smoke_profile("gpt2_tinystories", results, capfd)
    assert len(trials) == 4 and {t["status"] for t in trials} == {"ok"}
    assert {(t["num_heads"], t["head_dim"]) for t in trials} == {(3, 10), (4, 8)}  # floor_d_model at d 32
    for trial in trials:
        assert trial["metric"] == "val_loss" and trial["score"] == trial["val_loss"]
        assert 0 < trial["token_latency_ms"] < 1000
    assert_tables_agree(results)
