"""The report's Markdown (sweep/markdown.py): a query's rows as dicts, cells, tables and intervals in words."""

import duckdb

from sweep.markdown import KAPPA_RANK_DEFICIENT, interval_words, markdown_table, query, table_cell


def test_query_gives_rows_as_dicts_with_parameters():
    con = duckdb.connect()
    rows = query(con, "SELECT x, x * 2 AS y FROM range(3) t(x) WHERE x >= ? ORDER BY x", 1)
    assert rows == [{"x": 1, "y": 2}, {"x": 2, "y": 4}]


def test_a_kappa_beyond_float64_precision_is_named_rank_deficient():
    assert table_cell("kappa_median", 2e15) == "2e+15 (rank-deficient)"
    assert table_cell("kappa_median", 1e3) == "1000" and table_cell("params", 2e15) == "2e+15"
    assert KAPPA_RANK_DEFICIENT == 1e15 and table_cell("anything", None) == ""


def test_markdown_table_has_a_header_a_rule_and_a_line_per_row():
    text = markdown_table([{"a": 1, "b": "x"}, {"a": 1234}], ["a", "b"])
    assert text == "| a | b |\n|---|---|\n| 1 | x |\n| 1,234 |  |\n"
    assert markdown_table([], ["a"]) == "_(no rows)_\n"


def test_interval_words_give_the_interval_or_say_single_seed():
    row = {"delta": 1.2, "delta_lo": -0.3, "delta_hi": 2.7}
    assert interval_words(row, "delta", "top1") == "+1.2 (95% CI -0.3…+2.7)"
    single = {"delta": 1.2, "delta_lo": None, "delta_hi": None}
    assert interval_words(single, "delta", "top1") == "+1.2 (single seed)"
    assert interval_words(single, "delta", "top1", single="one run") == "+1.2 (one run)"
