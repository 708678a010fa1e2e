"""ListOps (Nangia & Bowman 2018) as the Long-Range Arena builds it (Tay et al. 2020), generated here.

Pure Python and numpy; nothing is downloaded. The grammar, the string form, the labels, the TSV layout
and the tokenisation follow LRA's ``lra_benchmarks/data/listops.py`` and
``lra_benchmarks/listops/input_pipeline.py``; the token ids are this module's own fixed vocabulary.

**The grammar.** A node at depth ``d`` (the root is at depth 1, an operator's arguments one deeper) is,
when ``d < max_depth``, an operator with probability ``VALUE_P`` = 0.25 and otherwise a value; at
``d == max_depth`` it is always a value. So at most ``max_depth - 1`` operators are nested and every value
sits at depth ≤ ``max_depth``. A value is a digit 0-9, uniform. An operator draws its argument count
uniformly from 2…``max_args`` (both included), then its arguments, then its kind, uniform over ``[MIN``,
``[MAX``, ``[MED``, ``[SM``, and is closed by ``]``. The random calls are LRA's ``generate_tree`` calls in
LRA's order, on a ``random.Random(seed)`` of its own (never the global random state).

**The length** of a tree counts tokens without parentheses: a value is 1, an operator is 2 (itself and
its ``]``) plus its arguments' lengths. It is exactly the number of tokens :func:`encode` returns.

**The string** (LRA's ``to_string``) nests every pair in ``( … )``: an operator ``op`` over arguments
a1 … ak is ``"( " * (k + 1) + op + " " + a1 + " )" + " a2 )" + … + " ak )" + " ] )"``; for example
``[MAX 2 9 ]`` is written ``( ( ( [MAX 2 ) 9 ) ] )``, and a lone value (a tree of length 1) is the digit.

**The label** of an operator over argument values v1 … vk: ``[MIN`` min, ``[MAX`` max, ``[MED``
``int(np.median(v))`` (for an even count the mean of the two middle values, truncated: median of 2 and 5
is 3), ``[SM`` sum mod 10. Labels are 0-9 (``NUM_CLASSES`` = 10).

**Rows kept.** A draw is kept when ``min_length < length < max_length`` (both strict, as LRA) and its
string has not been kept before (LRA keeps a set). A draw is abandoned as soon as its running length
reaches ``max_length`` (it would be rejected anyway; this changes which random numbers later draws see,
not the distribution of kept rows). LRA's defaults (``ListOpsOptions()``): max_depth 10, max_args 10,
lengths 500-2000, and 96,000 / 2,000 / 2,000 rows.

**Splits.** :func:`generate_rows` yields unique rows without end; :func:`generate_splits` gives the first
``val_rows`` kept rows to ``val``, the next ``test_rows`` to ``test`` and the rest to ``train``, so the three
are disjoint, the held-out splits do not depend on ``train_rows``, and a smaller ``train_rows`` is a prefix of
a larger one. (LRA partitions its set in the set's arbitrary order; any fixed order is as faithful.)

**Tokenisation** (LRA's): ``]`` is renamed ``X``, parentheses are removed, the rest is split on whitespace.
Ids: 0 = padding (``PAD_ID``), ``"0"``…``"9"`` = 1…10, ``[MIN`` 11, ``[MAX`` 12, ``[MED`` 13, ``[SM`` 14,
``X`` 15, anything else 16 (``UNK_ID``); ``VOCAB_SIZE`` = 17. :func:`encode_batch` keeps the first
``seq_len`` tokens of each row (LRA's ``[:max_length]``) and pads with 0 on the right.

**Files** (LRA's layout): ``basic_train.tsv``, ``basic_val.tsv``, ``basic_test.tsv``, written with
:mod:`csv` (tab delimiter, the default ``\\r\\n`` line ends), header ``Source<TAB>Target``.

**Cache.** :func:`load_or_generate` keeps the encoded splits as ``.npz`` under
``$SWEEP_CACHE_DIR/listops/`` (default ``~/.cache/heads-for-depth/listops/``; ``workers/data/cache.py``), keyed
by a hash of the options, seed, row counts and ``seq_len``; a hit reads the file and generates nothing.
``lra_listops`` (``workers/data/lra_listops.py``) reads LRA's own files with this module's reader and encoding.

**Time** (this machine, one CPU core, Python 3.11): 2,000 rows of LRA's options (lengths 500-2000, depth
10, 10 args) take about 3.4 s to generate (about 22,000 draws) and 0.3 s more to encode at seq_len 2000;
10,000 rows of lengths 20-100 at depth 4 (10 args) take about 0.7 s. LRA's full 100,000 rows took 290 s
(generation, encoding at seq_len 2000 and writing a 60 MB cache file, on 2 cores shared with other work);
reading them back from the cache took 9 s.
"""

from __future__ import annotations

import csv
import logging
import os
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np
from pydantic import Field, model_validator

from workers.config import StrictModel
from workers.data.base import BatchSource, SequenceDataSpec, keep_first_rows
from workers.data.cache import atomic_file, cache_dir, hash_key, read_arrays, write_arrays
from workers.data.splits import SequenceSplits

if TYPE_CHECKING:  # torch is imported where batches are opened: validating a space needs none
    import torch

log = logging.getLogger(__name__)

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)  # LRA's order: random.choice picks by index
VALUES = range(10)
VALUE_P = 0.25  # LRA: a node above max_depth is an operator when random() <= VALUE_P

END_TOKEN = "X"  # LRA renames "]" to "X" before tokenising
PAD_ID = 0
TOKENS = (*(str(v) for v in VALUES), MIN, MAX, MED, SUM_MOD, END_TOKEN)  # ids 1 … 15
TOKEN_IDS = {token: index for index, token in enumerate(TOKENS, start=1)}
UNK_ID = len(TOKENS) + 1  # 16: a token outside the fixed vocabulary
VOCAB_SIZE = UNK_ID + 1  # 17: ids 0 … 16
NUM_CLASSES = 10

SPLITS = ("train", "val", "test")
SPLIT_FILES = {split: f"basic_{split}.tsv" for split in SPLITS}
HEADER = ("Source", "Target")
LRA_ROOT_ENV = "LRA_ROOT"
CACHE_FORMAT = 1  # bump when the generator or the encoding changes: old cache files are then not read

MAX_STALE_DRAWS = 100_000  # draws in a row that add no row before the generator gives up


@dataclass(frozen=True)
class ListOpsOptions:
    """The grammar's parameters (LRA's flags of the same names; the defaults are LRA's).

    Rows are kept when ``min_length < length < max_length`` (strict). ``ValueError`` when no row can be.
    """

    max_depth: int = 10
    max_args: int = 10
    min_length: int = 500
    max_length: int = 2000

    def __post_init__(self) -> None:
        for name, low in (("max_depth", 1), ("max_args", 2), ("min_length", 0), ("max_length", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} >= {low} must hold (a whole number), but got ({name}={value!r})")
        if self.min_length >= self.max_length:
            raise ValueError(
                f"min_length < max_length must hold, but got (min_length={self.min_length}, "
                f"max_length={self.max_length})"
            )
        if self.min_length + 1 >= self.max_length:
            raise ValueError(
                f"min_length + 1 < max_length must hold: rows are kept when min_length < length < max_length, "
                f"strictly, so no length fits; but got (min_length={self.min_length}, max_length={self.max_length})"
            )
        longest = self.longest_tree()
        if longest <= self.min_length:
            raise ValueError(
                f"min_length < longest possible tree must hold, but got (min_length={self.min_length}, longest="
                f"{longest} for max_depth={self.max_depth}, max_args={self.max_args}); lower min_length or raise "
                "max_depth / max_args"
            )

    def longest_tree(self) -> int:
        """The greatest length any tree can have: operators with ``max_args`` arguments down to depth
        ``max_depth - 1``, values below."""
        length = 1
        for _ in range(self.max_depth - 1):
            length = 2 + self.max_args * length
        return length


class ListOpsRow(NamedTuple):
    """One kept tree: LRA's string form, its label (0-9) and its length (tokens, parentheses not counted)."""

    source: str
    label: int
    length: int


class _Abandoned(Exception):
    """A draw's running length reached max_length: it cannot be kept."""


def _median(values: list[int]) -> int:
    """``int(np.median(values))`` for non-negative ints, without numpy's per-call overhead."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) // 2  # truncation == floor for non-negative values


def apply_operator(op: str, values: list[int]) -> int:
    """The label of operator ``op`` over its arguments' values."""
    if op == MIN:
        return min(values)
    if op == MAX:
        return max(values)
    if op == MED:
        return _median(values)
    if op == SUM_MOD:
        return sum(values) % 10
    raise ValueError(f"unknown ListOps operator {op!r}; expected one of {OPERATORS}")


def draw_tree(rng: random.Random, options: ListOpsOptions) -> ListOpsRow | None:
    """One draw of LRA's ``generate_tree(1, max_depth, max_args)``: the row, or None when its length reaches
    ``max_length`` (the draw is abandoned there). The length filter's lower bound is not applied here."""
    uniform, randint, choice = rng.random, rng.randint, rng.choice
    max_depth, max_args, limit = options.max_depth, options.max_args, options.max_length
    length = 0

    def node(depth: int) -> tuple[str, int]:
        nonlocal length
        if depth < max_depth and uniform() <= VALUE_P:
            count = randint(2, max_args)
            length += 2
            if length >= limit:
                raise _Abandoned
            parts, values = [], []
            for _ in range(count):
                text, value = node(depth + 1)
                parts.append(text)
                values.append(value)
            op = choice(OPERATORS)
            return "( " * count + "( " + op + " " + " ) ".join(parts) + " ) ] )", apply_operator(op, values)
        value = choice(VALUES)
        length += 1
        if length >= limit:
            raise _Abandoned
        return str(value), value

    try:
        source, label = node(1)
    except _Abandoned:
        return None
    return ListOpsRow(source, label, length)


def generate_rows(options: ListOpsOptions, seed: int) -> Iterator[ListOpsRow]:
    """Kept rows without end, each new (no string twice), deterministic given ``options`` and ``seed``.

    ``ValueError`` once ``MAX_STALE_DRAWS`` draws in a row keep nothing (the options allow too few
    distinct rows, or almost none of the right length).
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    stale = 0
    while True:
        row = draw_tree(rng, options)
        if row is None or row.length <= options.min_length or row.source in seen:
            stale += 1
            if stale >= MAX_STALE_DRAWS:
                raise ValueError(
                    f"ListOps: {MAX_STALE_DRAWS:,} draws in a row kept no new row after {len(seen):,} rows; the "
                    f"options ({options}) allow too few distinct trees with min_length < length < max_length. "
                    "Widen the length range or raise max_depth / max_args, or ask for fewer rows."
                )
            continue
        stale = 0
        seen.add(row.source)
        yield row


def generate_splits(
    options: ListOpsOptions,
    seed: int,
    train_rows: int,
    val_rows: int,
    test_rows: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, list[ListOpsRow]]:
    """``{"train", "val", "test"}`` → rows: the first ``val_rows`` kept rows are val, the next ``test_rows``
    test, the next ``train_rows`` train (disjoint). ``progress(done, total)`` is called every 1,000 rows."""
    counts = {"val": val_rows, "test": test_rows, "train": train_rows}
    for split, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{split}_rows >= 0 must hold, but got ({split}_rows={count!r})")
    total = sum(counts.values())
    rows = generate_rows(options, seed)
    splits: dict[str, list[ListOpsRow]] = {}
    done = 0
    for split, count in counts.items():
        taken = []
        for _ in range(count):
            taken.append(next(rows))
            done += 1
            if progress is not None and (done % 1000 == 0 or done == total):
                progress(done, total)
        splits[split] = taken
    return {split: splits[split] for split in SPLITS}


# --- evaluation and tokenisation ----------------------------------------------------------------------


def source_tokens(source: str) -> list[str]:
    """LRA's preprocessing: ``]`` renamed ``X``, parentheses removed, split on whitespace."""
    return source.replace("]", END_TOKEN).replace("(", "").replace(")", "").split()


def evaluate(source: str) -> int:
    """The label of a ListOps string (LRA's form, or its tokens without parentheses, ``]`` or ``X``)."""
    stack: list[tuple[str, list[int]]] = []
    result: int | None = None
    for token in source_tokens(source):
        if token in OPERATORS:
            stack.append((token, []))
            continue
        if token == END_TOKEN:
            if not stack:
                raise ValueError(f"unbalanced ListOps expression: ']' without an operator in {source[:80]!r}")
            op, values = stack.pop()
            value = apply_operator(op, values)
        elif token.isdigit() and len(token) == 1:
            value = int(token)
        else:
            raise ValueError(f"unknown ListOps token {token!r} in {source[:80]!r}")
        if stack:
            stack[-1][1].append(value)
        elif result is None:
            result = value
        else:
            raise ValueError(f"ListOps expression has more than one top-level term: {source[:80]!r}")
    if stack or result is None:
        raise ValueError(f"unbalanced or empty ListOps expression: {source[:80]!r}")
    return result


def encode(source: str) -> list[int]:
    """Token ids of one row (see the module docstring), untruncated."""
    get = TOKEN_IDS.get
    return [get(token, UNK_ID) for token in source_tokens(source)]


def encode_batch(sources: Iterable[str], seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, lengths)``: ids int64 (N, seq_len), each row's first ``seq_len`` token ids then 0s;
    lengths int64 (N,), the real (unpadded) tokens of each row after truncation, ``min(tokens, seq_len)``."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len >= 1 must hold, but got (seq_len={seq_len!r})")
    rows = [encode(source)[:seq_len] for source in sources]
    ids = np.zeros((len(rows), seq_len), dtype=np.int64)
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
    return ids, lengths


def attention_mask(lengths: np.ndarray, seq_len: int) -> np.ndarray:
    """int64 (N, seq_len): 1 for the real tokens of each row, 0 for padding."""
    return (np.arange(seq_len)[None, :] < np.asarray(lengths)[:, None]).astype(np.int64)


# --- files --------------------------------------------------------------------------------------------


class ListOpsFormatError(ValueError):
    """A ListOps TSV file is not in LRA's layout; the message names the file and line."""


def write_tsv(path: str | os.PathLike, rows: Iterable[tuple[str, int]]) -> int:
    """Write rows (source, label) as LRA does: csv, tab delimiter, header ``Source<TAB>Target``; the number
    of rows written. Written to a temporary file beside ``path`` and renamed, so no torn file is left."""
    path = Path(path)
    count = 0
    with atomic_file(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(HEADER)
        for source, label in rows:
            writer.writerow((source, int(label)))
            count += 1
    return count


def iter_tsv(path: str | os.PathLike) -> Iterator[tuple[str, int]]:
    """(source, label) of each row of an LRA ListOps TSV. ``FileNotFoundError`` naming the path and
    ``$LRA_ROOT`` when it is missing; :class:`ListOpsFormatError` naming file and line for a header other than
    ``Source<TAB>Target``, a row without exactly two tab-separated fields, or a target that is not 0-9."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"ListOps file {path} does not exist; expected LRA's {', '.join(SPLIT_FILES.values())} under the "
            f"folder given by `data.root` or ${LRA_ROOT_ENV} (in LRA's release: lra_release/listops-1000/). "
            "Nothing is downloaded; `sweep data export listops` writes generated ones."
        )
    with path.open(newline="", encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if line_number == 1:
                if tuple(fields) != HEADER:
                    raise ListOpsFormatError(
                        f"{path}:1: the header must be 'Source<TAB>Target' (LRA's layout), but got {line[:80]!r}"
                    )
                continue
            if fields == [""]:
                continue  # a blank line (e.g. a trailing one)
            if len(fields) != 2:
                raise ListOpsFormatError(
                    f"{path}:{line_number}: a row must be 'Source<TAB>Target' (2 fields), but got {len(fields)} "
                    f"field(s): {line[:80]!r}"
                )
            source, target = fields
            try:
                label = int(target)
            except ValueError:
                raise ListOpsFormatError(
                    f"{path}:{line_number}: Target must be a whole number 0-9, but got {target[:40]!r}"
                ) from None
            if not 0 <= label < NUM_CLASSES:
                raise ListOpsFormatError(f"{path}:{line_number}: Target must be 0-9, but got {label}")
            yield source, label


def read_tsv(path: str | os.PathLike, limit: int | None = None) -> list[tuple[str, int]]:
    """The first ``limit`` rows (all when None) of :func:`iter_tsv`."""
    rows = []
    for row in iter_tsv(path):
        if limit is not None and len(rows) >= limit:
            break
        rows.append(row)
    return rows


def write_splits(out: str | os.PathLike, splits: dict[str, list[ListOpsRow]]) -> dict[str, Path]:
    """Write each split's rows to ``out/basic_<split>.tsv`` (LRA's names); the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, rows in splits.items():
        path = out / SPLIT_FILES[split]
        write_tsv(path, ((row.source, row.label) for row in rows))
        written[split] = path
    return written


# --- cache --------------------------------------------------------------------------------------------


def cache_key(options: ListOpsOptions, seed: int, train_rows: int, val_rows: int, test_rows: int, seq_len: int) -> str:
    """Hash of everything the encoded splits depend on (and the cache format)."""
    identity = {
        "format": CACHE_FORMAT,
        "options": asdict(options),
        "seed": seed,
        "rows": [train_rows, val_rows, test_rows],
        "seq_len": seq_len,
    }
    return hash_key(identity)


def encode_splits(splits: dict[str, list[ListOpsRow]], seq_len: int) -> dict[str, np.ndarray]:
    """``{f"{split}_ids", f"{split}_lengths", f"{split}_labels"}`` for each split (see :func:`encode_batch`)."""
    arrays = {}
    for split, rows in splits.items():
        ids, lengths = encode_batch((row.source for row in rows), seq_len)
        arrays[f"{split}_ids"] = ids
        arrays[f"{split}_lengths"] = lengths
        arrays[f"{split}_labels"] = np.fromiter((row.label for row in rows), dtype=np.int64, count=len(rows))
    return arrays


def load_or_generate(
    options: ListOpsOptions,
    seed: int,
    train_rows: int,
    val_rows: int,
    test_rows: int,
    seq_len: int,
    directory: str | os.PathLike | None = None,
) -> dict[str, np.ndarray]:
    """The encoded splits (:func:`encode_splits`' arrays, int64) from the cache file for these arguments, or
    generated with :func:`generate_splits` and stored there (``workers.data.cache``: atomic, keyed).

    ``directory`` defaults to ``$SWEEP_CACHE_DIR/listops``. An unreadable cache file is regenerated; a cache
    folder that cannot be written is logged and the data returned anyway.
    """
    key = cache_key(options, seed, train_rows, val_rows, test_rows, seq_len)
    folder = Path(directory).expanduser() if directory is not None else cache_dir("listops")
    path = folder / f"listops-{key}.npz"
    stored = read_arrays(path, key, "ListOps")
    if stored is not None and len(stored) == 3 * len(SPLITS):
        return {name: array.astype(np.int64) for name, array in stored.items()}
    arrays = encode_splits(generate_splits(options, seed, train_rows, val_rows, test_rows), seq_len)
    compact = {name: array.astype(np.uint8) if name.endswith("_ids") else array for name, array in arrays.items()}
    write_arrays(path, key, compact, "ListOps", compressed=True)
    return arrays


# --- the data set ---------------------------------------------------------------------------------------


class ListOpsSpec(StrictModel):
    """The generator's options (``data.listops``); the defaults are LRA's. Rows are kept when
    ``min_length < length < max_length`` (strict; the length counts tokens, parentheses not included).
    ``seed`` is the data set's generation seed: the same for every trial of a sweep, not the trial seed."""

    max_depth: int = Field(default=10, ge=1, description="operators nest at most max_depth - 1 deep")
    max_args: int = Field(default=10, ge=2, description="arguments per operator: 2 … max_args")
    min_length: int = Field(default=500, ge=0, description="rows kept have length > min_length")
    max_length: int = Field(default=2000, ge=2, description="rows kept have length < max_length")
    train_rows: int = Field(default=96000, ge=1)
    val_rows: int = Field(default=2000, ge=1)
    test_rows: int = Field(default=2000, ge=1)
    seed: int = Field(default=0, description="generation seed of the data set, shared by every trial")

    @model_validator(mode="after")
    def _lengths_possible(self) -> ListOpsSpec:
        self.options()  # ValueError stating the rule and the values when no row can be kept
        return self

    def options(self) -> ListOpsOptions:
        """The grammar's parameters as :class:`ListOpsOptions`."""
        return ListOpsOptions(self.max_depth, self.max_args, self.min_length, self.max_length)


class ListOpsData(SequenceDataSpec):
    """``data: {name: listops, seq_len: N, listops: {…}}``: ListOps generated with LRA's grammar (``listops``
    None: LRA's options) and cached under ``$SWEEP_CACHE_DIR/listops/``, generated once per machine."""

    name: Literal["listops"] = "listops"
    listops: ListOpsSpec | None = Field(default=None, description="generator options; None means LRA's")

    def model_fields_from_data(self) -> dict:
        return {"seq_len": self.seq_len, "vocab_size": VOCAB_SIZE, "num_classes": NUM_CLASSES}

    def tiny_copy(self, rows: int) -> ListOpsData:
        """Also generates only ``rows`` rows per split, with the same grammar and lengths (LRA's 100,000 rows take
        about 5 minutes)."""
        options = self.listops or ListOpsSpec()
        small = options.model_copy(update={"train_rows": rows, "val_rows": rows, "test_rows": rows})
        return super().tiny_copy(rows).model_copy(update={"listops": small})

    def load_arrays(self) -> SequenceSplits:
        options = self.listops or ListOpsSpec()
        arrays = load_or_generate(
            options.options(), options.seed, options.train_rows, options.val_rows, options.test_rows, self.seq_len
        )
        held_out = self.eval_split
        splits = SequenceSplits(
            "listops",
            arrays["train_ids"],
            arrays["train_lengths"],
            arrays["train_labels"],
            arrays[f"{held_out}_ids"],
            arrays[f"{held_out}_lengths"],
            arrays[f"{held_out}_labels"],
            held_out,
            self.seq_len,
            VOCAB_SIZE,
            NUM_CLASSES,
        )
        return keep_first_rows(splits, self)

    def open_batches(self, device: torch.device, arrays: SequenceSplits | None = None) -> BatchSource:
        from workers.data.batches import SequenceBatches  # imports torch

        return SequenceBatches(arrays if arrays is not None else self.load_arrays(), self, device)
