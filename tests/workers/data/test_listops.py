"""ListOps with LRA's grammar: labels checked by an evaluator written here, the string form, tokens, files,
the cache, the batches, the config rules and `sweep data export listops`."""

import random

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from sweep.cli import main
from workers.data import listops
from workers.data.base import DataNotFoundError
from workers.data.batches import SequenceBatches
from workers.data.listops import ListOpsOptions, ListOpsSpec, encode, encode_batch, generate_splits
from workers.data.registry import data_spec, load_arrays, open_batches
from workers.data.splits import SequenceSplits

CPU = torch.device("cpu")
SHORT = ListOpsOptions(max_depth=4, max_args=5, min_length=10, max_length=60)
OPS = {"[MIN": min, "[MAX": max, "[MED": lambda v: int(np.median(v)), "[SM": lambda v: int(np.sum(v)) % 10}


# --- an evaluator written here, independent of the module ------------------------------------------------


def parse(source):
    """(label, length, depth) of an LRA ListOps string: parentheses dropped, a stack of open operators.
    The root is at depth 1; a node's arguments one deeper."""
    stack, result, length, depth = [], None, 0, 0
    for token in source.replace("(", " ").replace(")", " ").split():
        length += 1
        if token in OPS:
            stack.append((token, []))
            depth = max(depth, len(stack))
            continue
        if token == "]":
            op, args = stack.pop()
            assert len(args) >= 2
            value = OPS[op](args)
        else:
            value = int(token)
            assert 0 <= value <= 9 and token == str(value)
            depth = max(depth, len(stack) + 1)
        if stack:
            stack[-1][1].append(value)
        else:
            assert result is None
            result = value
    assert not stack
    return result, length, depth


def tree(tokens):
    """Nested (op, [args]) from LRA's tokens (no parentheses)."""

    def node(position):
        token = tokens[position]
        if token not in OPS:
            return int(token), position + 1
        args, position = [], position + 1
        while tokens[position] != "]":
            arg, position = node(position)
            args.append(arg)
        return (token, args), position + 1

    root, end = node(0)
    assert end == len(tokens)
    return root


def lra_to_string(node):
    """LRA's to_string over LRA's pairs: (op, a1), then ((…), a2) …, then ((…), ']')."""

    def pairs(node):
        if isinstance(node, int):
            return node
        op, args = node
        t = (op, pairs(args[0]))
        for arg in args[1:]:
            t = (t, pairs(arg))
        return (t, "]")

    def to_string(t):
        if isinstance(t, str):
            return t
        if isinstance(t, int):
            return str(t)
        return "( " + to_string(t[0]) + " " + to_string(t[1]) + " )"

    return to_string(pairs(node))


def check_rows(rows, options):
    for row in rows:
        label, length, depth = parse(row.source)
        assert row.label == label and row.length == length
        assert options.min_length < length < options.max_length
        assert depth <= options.max_depth
        assert lra_to_string(tree(row.source.replace("(", " ").replace(")", " ").split())) == row.source


# --- the generator ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "seed"),
    [
        (SHORT, 0),
        (SHORT, 7),
        (ListOpsOptions(max_depth=3, max_args=3, min_length=3, max_length=14), 1),
        (ListOpsOptions(max_depth=6, max_args=10, min_length=40, max_length=300), 2),
    ],
)
def test_every_label_length_depth_and_string_matches_an_independent_evaluator(options, seed):
    splits = generate_splits(options, seed, 300, 30, 30)
    assert [len(splits[s]) for s in ("train", "val", "test")] == [300, 30, 30]
    for rows in splits.values():
        check_rows(rows, options)
    assert len({row.label for row in splits["train"]}) > 3  # not a degenerate generator


def test_lra_default_options_give_long_rows_with_correct_labels():
    rows = generate_splits(ListOpsOptions(), 3, 12, 1, 1)["train"]
    check_rows(rows, ListOpsOptions())
    assert all(500 < row.length < 2000 for row in rows)


def test_string_form_is_lras():
    assert listops.evaluate("( ( ( [MAX 2 ) 9 ) ] )") == 9
    assert lra_to_string(("[MAX", [2, 9])) == "( ( ( [MAX 2 ) 9 ) ] )"
    assert listops.source_tokens("( ( ( [MAX 2 ) 9 ) ] )") == ["[MAX", "2", "9", "X"]
    nested = "( ( ( ( [MED 2 ) 5 ) ( ( ( [SM 9 ) 8 ) ] ) ) ] )"  # [MED 2 5 [SM 9 8 ] ]: median(2, 5, 7)
    assert lra_to_string(("[MED", [2, 5, ("[SM", [9, 8])])) == nested and listops.evaluate(nested) == 5
    assert listops.evaluate("( ( ( [MED 2 ) 5 ) ] )") == 3  # int(np.median([2, 5])) = int(3.5)


def test_deterministic_given_the_seed_and_different_across_seeds_without_global_state():
    random.seed(123)
    state = random.getstate()
    first = generate_splits(SHORT, 5, 50, 10, 10)
    assert random.getstate() == state  # never the global random state
    assert first == generate_splits(SHORT, 5, 50, 10, 10)
    assert first["train"] != generate_splits(SHORT, 6, 50, 10, 10)["train"]


def test_rows_are_unique_splits_disjoint_and_stable_across_train_sizes():
    big = generate_splits(SHORT, 0, 400, 40, 40)
    sources = [row.source for rows in big.values() for row in rows]
    assert len(sources) == len(set(sources)) == 480
    small = generate_splits(SHORT, 0, 100, 40, 40)
    assert small["val"] == big["val"] and small["test"] == big["test"]  # held out: independent of train_rows
    assert small["train"] == big["train"][:100]


def test_options_that_allow_too_few_rows_fail_instead_of_looping(monkeypatch):
    monkeypatch.setattr(listops, "MAX_STALE_DRAWS", 2000)
    with pytest.raises(ValueError, match="too few distinct trees"):
        generate_splits(ListOpsOptions(max_depth=2, max_args=2, min_length=0, max_length=10), 0, 1000, 1, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_length": 60, "max_length": 60}, r"min_length < max_length must hold, but got \(min_length=60, max_len"),
        ({"min_length": 59, "max_length": 60}, r"min_length \+ 1 < max_length must hold"),
        ({"max_depth": 2, "min_length": 12}, r"longest=12 for max_depth=2, max_args=10"),
        ({"max_args": 1}, r"max_args >= 2 must hold"),
    ],
)
def test_options_state_the_rule_and_the_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ListOpsOptions(**{"min_length": 10, "max_length": 60, **kwargs})


# --- tokens -----------------------------------------------------------------------------------------------


def test_token_ids_come_from_the_fixed_vocabulary():
    assert listops.VOCAB_SIZE == 17 and listops.PAD_ID == 0 and listops.UNK_ID == 16 and listops.NUM_CLASSES == 10
    assert encode("( ( ( [MAX 2 ) 9 ) ] )") == [12, 3, 10, 15]
    assert encode("[MIN 0 [SM 1 ] [MED 4 ] ]") == [11, 1, 14, 2, 15, 13, 5, 15, 15]
    assert encode("[FIRST 1 ]") == [16, 2, 15]
    assert sorted(listops.TOKEN_IDS.values()) == list(range(1, 16))


def test_encode_batch_truncates_like_lra_and_pads_with_zero():
    ids, lengths = encode_batch(["( ( ( [MAX 2 ) 9 ) ] )", "( ( ( ( [SM 1 ) 2 ) 3 ) ] )"], 4)
    assert ids.dtype == np.int64 and lengths.dtype == np.int64
    assert ids.tolist() == [[12, 3, 10, 15], [14, 2, 3, 4]]  # the second keeps its first 4 of 5 tokens
    assert lengths.tolist() == [4, 4]
    ids, lengths = encode_batch(["( ( ( [MAX 2 ) 9 ) ] )"], 6)
    assert ids.tolist() == [[12, 3, 10, 15, 0, 0]] and lengths.tolist() == [4]
    assert listops.attention_mask(lengths, 6).tolist() == [[1, 1, 1, 1, 0, 0]]


# --- files ------------------------------------------------------------------------------------------------


def write_lra_folder(root, seed=0, rows=(40, 6, 5)):
    return listops.write_splits(root, generate_splits(SHORT, seed, *rows))


def test_tsv_round_trip_in_lras_layout(tmp_path):
    paths = write_lra_folder(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["basic_test.tsv", "basic_train.tsv", "basic_val.tsv"]
    assert paths["val"].read_bytes().startswith(b"Source\tTarget\r\n")  # csv's default line end, as LRA's files
    rows = listops.read_tsv(paths["train"])
    assert len(rows) == 40 and all(parse(source)[0] == label for source, label in rows)
    assert listops.read_tsv(paths["train"], limit=3) == rows[:3]


def test_a_missing_tsv_names_the_file_and_lra_root(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"basic_train\.tsv does not exist.*LRA_ROOT"):
        listops.read_tsv(tmp_path / "basic_train.tsv")


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("source\ttarget\n1\t1\n", r"bad\.tsv:1: the header must be 'Source<TAB>Target'"),
        (
            "Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n( ( ( [MAX 2 ) 9 ) ] )\tnine\n",
            r"bad\.tsv:3: Target must be a whole number",
        ),
        ("Source\tTarget\n7\t12\n", r"bad\.tsv:2: Target must be 0-9, but got 12"),
        ("Source\tTarget\n7\n", r"bad\.tsv:2: .*2 fields"),
    ],
)
def test_tsv_errors_name_the_file_and_line(tmp_path, content, error):
    bad = tmp_path / "bad.tsv"
    bad.write_text(content)
    with pytest.raises(listops.ListOpsFormatError, match=error):
        listops.read_tsv(bad)


def test_lra_listops_reads_the_tsvs_from_root_or_lra_root(tmp_path, monkeypatch):
    write_lra_folder(tmp_path)
    spec = data_spec(name="lra_listops", root=str(tmp_path), seq_len=16)
    splits = load_arrays(spec)
    assert isinstance(splits, SequenceSplits) and splits.eval_split == "val"
    assert splits.ids_train.shape == (40, 16) and splits.ids_eval.shape == (6, 16)
    assert splits.lengths_train.max() == 16 and splits.lengths_train.min() > 10  # truncated to seq_len
    expected = [encode(source)[:16] for source, _ in listops.read_tsv(tmp_path / "basic_train.tsv")]
    assert [row[:n].tolist() for row, n in zip(splits.ids_train, splits.lengths_train, strict=True)] == expected
    monkeypatch.setenv("LRA_ROOT", str(tmp_path))
    test_split = load_arrays(data_spec(name="lra_listops", seq_len=64, eval_split="test", limit_train=7))
    assert test_split.ids_train.shape == (7, 64) and len(test_split.y_eval) == 5
    assert data_spec(name="lra_listops", seq_len=8).require_local() == tmp_path


def test_lra_listops_missing_names_files_and_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("LRA_ROOT", raising=False)
    with pytest.raises(DataNotFoundError, match="LRA_ROOT"):
        data_spec(name="lra_listops", seq_len=8).require_local()
    (tmp_path / "basic_train.tsv").write_text("Source\tTarget\n")
    with pytest.raises(DataNotFoundError, match=r"basic_val\.tsv, basic_test\.tsv are missing.*LRA_ROOT"):
        load_arrays(data_spec(name="lra_listops", root=str(tmp_path), seq_len=8))
    assert data_spec(name="listops", seq_len=8).require_local() is None  # generated: needs nothing


# --- cache ------------------------------------------------------------------------------------------------


def test_cache_hit_does_not_regenerate(tmp_path, monkeypatch):
    first = listops.load_or_generate(SHORT, 0, 30, 5, 5, 32, tmp_path)
    assert len(list(tmp_path.glob("listops-*.npz"))) == 1 and not list(tmp_path.glob(".*tmp"))

    def fail(*args, **kwargs):
        raise AssertionError("a cache hit must not generate")

    monkeypatch.setattr(listops, "generate_splits", fail)
    second = listops.load_or_generate(SHORT, 0, 30, 5, 5, 32, tmp_path)
    assert first.keys() == second.keys() and all(np.array_equal(first[k], second[k]) for k in first)
    assert second["train_ids"].dtype == np.int64
    with pytest.raises(AssertionError, match="must not generate"):
        listops.load_or_generate(SHORT, 0, 30, 5, 5, 33, tmp_path)  # another seq_len: another key


def test_listops_data_set_uses_the_cache_under_sweep_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path))
    options = {"max_depth": 4, "max_args": 5, "min_length": 10, "max_length": 60}
    spec = data_spec(name="listops", seq_len=64, listops={**options, "train_rows": 50, "val_rows": 9, "test_rows": 4})
    splits = load_arrays(spec)
    assert len(list((tmp_path / "listops").glob("listops-*.npz"))) == 1
    assert splits.ids_train.shape == (50, 64) and splits.ids_eval.shape == (9, 64) and splits.vocab_size == 17
    rows = generate_splits(SHORT, 0, 50, 9, 4)
    assert splits.y_eval.tolist() == [row.label for row in rows["val"]]
    monkeypatch.setattr(listops, "generate_splits", None)  # a hit: not called
    held_out = load_arrays(spec.model_copy(update={"eval_split": "test", "limit_train": 20}))
    assert held_out.y_eval.tolist() == [row.label for row in rows["test"]] and len(held_out.y_train) == 20


def test_unreadable_cache_file_is_regenerated(tmp_path):
    first = listops.load_or_generate(SHORT, 0, 10, 2, 2, 16, tmp_path)
    (path,) = tmp_path.glob("listops-*.npz")
    path.write_bytes(b"not a zip")
    again = listops.load_or_generate(SHORT, 0, 10, 2, 2, 16, tmp_path)
    assert np.array_equal(first["train_ids"], again["train_ids"]) and path.stat().st_size > 100


# --- batches ----------------------------------------------------------------------------------------------


@pytest.fixture
def listops_spec(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEP_CACHE_DIR", str(tmp_path))
    options = {"max_depth": 4, "max_args": 5, "min_length": 10, "max_length": 60, "train_rows": 70}
    return data_spec(name="listops", seq_len=48, listops={**options, "val_rows": 20, "test_rows": 3})


def test_sequence_batches_shapes_masks_shuffling_and_probe(listops_spec):
    splits = load_arrays(listops_spec)
    batches = open_batches(listops_spec, CPU, splits)
    assert isinstance(batches, SequenceBatches)
    meta = batches.meta
    assert (meta.num_classes, meta.seq_len, meta.vocab_size, meta.train_size, meta.val_size) == (10, 48, 17, 70, 20)
    assert batches.steps_per_epoch(16) == 4
    epoch = list(batches.train_batches(16, torch.Generator().manual_seed(1)))
    assert len(epoch) == 4
    for inputs, labels in epoch:
        assert inputs["input_ids"].shape == inputs["attention_mask"].shape == (16, 48)
        assert inputs["input_ids"].dtype == inputs["attention_mask"].dtype == labels.dtype == torch.int64
        assert torch.equal(inputs["attention_mask"].bool(), inputs["input_ids"] != 0)  # ids are never 0
    again = list(batches.train_batches(16, torch.Generator().manual_seed(1)))
    other = list(batches.train_batches(16, torch.Generator().manual_seed(2)))
    assert all(torch.equal(a[0]["input_ids"], b[0]["input_ids"]) for a, b in zip(epoch, again, strict=True))
    assert not torch.equal(epoch[0][0]["input_ids"], other[0][0]["input_ids"])
    seen = torch.cat([labels for _, labels in epoch])
    assert len(seen) == 64  # the ragged last batch is dropped
    val = list(batches.val_batches(8))
    assert [len(labels) for _, labels in val] == [8, 8, 4]
    assert torch.cat([labels for _, labels in val]).tolist() == splits.y_eval.tolist()  # in order
    assert torch.equal(val[0][0]["input_ids"], torch.as_tensor(splits.ids_eval[:8]))
    probe = batches.probe_images(5)
    assert torch.equal(probe["input_ids"], batches.probe_images(5)["input_ids"])
    assert torch.equal(probe["attention_mask"].sum(1), torch.as_tensor(splits.lengths_eval[:5]))


def test_sequence_batches_load_when_not_given_and_check_seq_len(listops_spec):
    batches = open_batches(listops_spec, CPU)
    assert batches.meta.train_size == 70
    with pytest.raises(ValueError, match=r"seq_len=48.*seq_len=32"):
        SequenceBatches(batches.splits, listops_spec.model_copy(update={"seq_len": 32}), CPU)


# --- config -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "listops"}, "seq_len is required"),
        ({"name": "digits", "seq_len": 8}, r"digits\.seq_len\n\s+Extra inputs are not permitted"),
        ({"name": "cifar10", "eval_split": "test"}, r"cifar10\.eval_split\n\s+Extra inputs are not permitted"),
        ({"name": "digits", "listops": {}}, r"digits\.listops\n\s+Extra inputs are not permitted"),
        (
            {"name": "lra_listops", "seq_len": 8, "listops": {}},
            r"lra_listops\.listops\n\s+Extra inputs are not permitted",
        ),
        (
            {"name": "listops", "seq_len": 8, "listops": {"min_length": 70, "max_length": 50}},
            r"min_length < max_length must hold, but got \(min_length=70, max_length=50\)",
        ),
        ({"name": "listops", "seq_len": 8, "img_size": 8}, r"listops\.img_size\n\s+Extra inputs are not permitted"),
        ({"name": "listops", "seq_len": 8, "eval_split": "train"}, "eval_split"),
        ({"name": "listops", "seq_len": 8, "listops": {"rows": 3}}, "rows"),
    ],
)
def test_data_spec_rules(data, message):
    with pytest.raises(ValidationError, match=message):
        data_spec(**data)


def test_data_spec_defaults_and_image_dump_unchanged():
    spec = data_spec(name="listops", seq_len=2000)
    assert spec.listops is None and spec.eval_split == "val"
    assert ListOpsSpec() == ListOpsSpec(
        max_depth=10, max_args=10, min_length=500, max_length=2000, train_rows=96000, val_rows=2000, test_rows=2000
    )
    assert data_spec(**spec.model_dump()) == spec
    image_keys = set(data_spec(name="cifar10").model_dump())
    assert not image_keys & {"seq_len", "eval_split", "listops"}  # image configs (and their ids) as before


# --- the export command -----------------------------------------------------------------------------------


def test_export_command_writes_lra_files_with_correct_labels(tmp_path, capsys):
    assert main(["data", "export", "listops", "--rows", "400", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "basic_train.tsv: 400 rows" in out and "basic_val.tsv: 8 rows" in out and "basic_test.tsv: 8 rows" in out
    sources = set()
    for name, count in (("basic_train.tsv", 400), ("basic_val.tsv", 8), ("basic_test.tsv", 8)):
        text = (tmp_path / name).read_text()
        lines = text.splitlines()
        assert lines[0] == "Source\tTarget" and len(lines) == count + 1
        for line in lines[1:]:
            source, target = line.split("\t")
            label, length, depth = parse(source)
            assert int(target) == label and 500 < length < 2000 and depth <= 10
            sources.add(source)
    assert len(sources) == 416


def test_export_command_errors_are_one_line_with_status_2(tmp_path, capsys):
    args = ["data", "export", "listops", "--rows", "10", "--out", str(tmp_path / "x")]
    assert main([*args, "--min-length", "80", "--max-length", "40"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bad ListOps options: min_length < max_length") and err.count("\n") == 1
    assert main([*args, "--val-rows", "0"]) == 2
    assert "--val-rows must be at least 1" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["data", "export", "listops", "--rows", "10", "--out", str(blocker / "sub")]) == 2
    assert "cannot write to the output folder" in capsys.readouterr().err
