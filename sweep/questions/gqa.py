"""The question "what does sharing key/value heads cost, and what does it save?": the ``num_kv_heads`` axis
(grouped-query attention: ``num_heads / num_kv_heads`` query heads share each key/value head; as many as the
heads is multi-head attention). The axis is part of every shape and of every core view (``num_kv_heads`` is a
column of configs, vs_baseline and the edges, which judge each grouping against its own baseline), so this
question adds no view of its own: it removes the combinations whose key/value heads do not divide the heads,
shows the axis in ``sweep plan``, and sets beside the verdicts what grouping saves when decoding (the KV cache
per token and the per-token latency, recorded by the language-model families).
"""

from __future__ import annotations

from sweep.questions.base import Axis, Question


class GroupedQueryQuestion(Question):
    """The ``num_kv_heads`` axis: grouped-query attention."""

    name = "gqa"
    axes = (
        Axis(
            "num_kv_heads",
            "BIGINT",
            "key/value heads (grouped-query attention); = num_heads for multi-head attention",
            default_sql="num_heads",  # None in a shape: as many as its heads (Shape.kv_heads)
            order_sql="num_kv_heads DESC",  # multi-head attention first
            across_heads=("num_heads // num_kv_heads", "heads_per_kv_head"),
        ),
    )
    # What grouping saves when decoding, beside what it costs: the report's verdict table adds these for a
    # space with grouped configs (sweep/analysis/report/write.py).
    verdict_columns = ("kv_cache_bytes_per_token", "token_latency_ms")

    def combination_rule(self, combination: dict) -> str | None:
        kv, heads = combination.get("num_kv_heads"), combination["num_heads"]
        if kv is not None and (kv > heads or heads % kv):
            return f"num_kv_heads={kv} does not divide num_heads={heads}"
        return None


QUESTION = GroupedQueryQuestion()
