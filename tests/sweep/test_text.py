"""The words the tool prints (sweep/text.py): plurals, numbers as people read them, shapes in words."""

from datetime import datetime

from sweep.text import format_value, human, plural, readable, shape_words, short_shape, with_kv


def test_plural_takes_the_noun_by_count_and_an_irregular_plural():
    assert [plural(n, "head") for n in (0, 1, 2)] == ["0 heads", "1 head", "2 heads"]
    assert plural(3, "query", "queries") == "3 queries"


def test_readable_numbers():
    assert readable(5873890) == "5,873,890"
    assert readable(0.0123) == "0.0123" and readable(123.456) == "123.5"
    assert readable(12345.6) == "12,346" and readable(1.2e15) == "1.2e+15" and readable(3e-5) == "3e-05"
    assert readable(0.0) == "0" and readable(float("inf")) == "inf" and readable(True) == "True"


def test_human_counts_in_thousands_millions_billions():
    assert [human(n) for n in (999, 136138, 86567656, 35127656448)] == ["999", "136.1K", "86.6M", "35.1G"]


def test_format_value_for_a_table_cell():
    assert format_value(None) == "" and format_value(1 / 3) == "0.333333" and format_value(float("inf")) == "inf"
    assert format_value(datetime(2025, 1, 2, 3, 4, 5, 678)) == "2025-01-02T03:04:05" and format_value("x") == "x"


def test_shapes_in_words_name_key_value_heads_only_when_grouped():
    mha = {"depth": 1, "num_heads": 4, "head_dim": 16, "num_kv_heads": 4}
    gqa = {"depth": 2, "num_heads": 16, "head_dim": 4, "num_kv_heads": 1}
    assert shape_words(mha) == "1 block × 4 heads of 16"
    assert shape_words(gqa) == "2 blocks × 16 heads of 4, 1 key/value head"
    assert (short_shape(mha), short_shape(gqa)) == ("1×4", "2×16/1kv")
    columns = ["depth", "num_heads", "score"]
    assert with_kv(columns, [mha]) == columns
    assert with_kv(columns, [mha, gqa], ("x",)) == ["depth", "num_heads", "num_kv_heads", "score", "x"]
