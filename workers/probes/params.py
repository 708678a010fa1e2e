"""Parameter counts, total and by component."""

from __future__ import annotations

from torch import nn

from workers.config import ModelSpec
from workers.models import attention_layers, mlp_layers


def count_params(module: nn.Module) -> int:
    """Number of scalar parameters in ``module`` (each shared tensor counted once)."""
    return sum(p.numel() for p in module.parameters())


def param_breakdown(spec: ModelSpec, model: nn.Module) -> dict[str, int]:
    """Parameters of ``model``: total, and split into three parts that sum to the total.

    - ``params_attention``: every attention module (q/k/v projection, output projection, their biases,
      and q/k norms where present), as located by the family's ``attention_layers``;
    - ``params_mlp``: every block MLP (fc1, fc2 and biases), as located by the family's ``mlp_layers``;
    - ``params_embed_head``: everything else: patch embedding, class token, position embedding, the
      blocks' LayerNorms, the final norm and the classifier head.
    """
    total = count_params(model)
    attention = sum(count_params(m) for _, m in attention_layers(spec, model))
    mlp = sum(count_params(m) for _, m in mlp_layers(spec, model))
    return {
        "params": total,
        "params_attention": attention,
        "params_mlp": mlp,
        "params_embed_head": total - attention - mlp,
    }


def vit_params_formula(spec: ModelSpec) -> int:
    """Closed-form parameter count of a timm ViT with class token and learned positions.

    With C = embed_dim, H·d = attention width, M = mlp_dim, L = depth, p = patch, c = in_chans,
    K = classes, T = tokens (patches + 1):
      embeddings  c·p²·C + C (patch conv) + C (class token) + T·C (positions)
      per block   2C (norm1) + C·3Hd + 3Hd (qkv, bias) + Hd·C + C (proj) + 2C (norm2)
                  + C·M + M (fc1) + M·C + C (fc2)
      head        2C (final norm) + C·K + K
    Written independently of timm so tests can check the built model against it.
    """
    c_dim, attn_dim, mlp = spec.embed_dim, spec.attn_dim, spec.mlp_dim
    qkv_bias = 3 * attn_dim if spec.qkv_bias else 0
    embed = spec.in_chans * spec.patch_size**2 * c_dim + c_dim + c_dim + spec.num_tokens * c_dim
    block = (
        2 * c_dim
        + c_dim * 3 * attn_dim
        + qkv_bias
        + attn_dim * c_dim
        + c_dim
        + 2 * c_dim
        + c_dim * mlp
        + mlp
        + mlp * c_dim
        + c_dim
    )
    head = 2 * c_dim + c_dim * spec.num_classes + spec.num_classes
    return embed + spec.depth * block + head
