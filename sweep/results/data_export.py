"""``sweep data export listops``: generated ListOps written as LRA's three TSV files.

The rows come from ``workers.data.listops`` (LRA's grammar, a seeded generator of its own); the files are LRA's
layout (``basic_train.tsv``, ``basic_val.tsv``, ``basic_test.tsv``, header ``Source<TAB>Target``), so a
folder written here can be read back as ``data: {name: lra_listops, root: DIR}`` or by LRA's own code.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sweep.errors import DataExportError
from workers.data import listops

PROGRESS_FROM_ROWS = 5000  # show progress on stderr when at least this many rows are generated
LRA_TRAIN_PER_HELD_OUT = 48  # LRA: 96,000 training rows, 2,000 val and 2,000 test


@dataclass(frozen=True)
class ExportedFile:
    split: str
    path: Path
    rows: int
    min_length: int
    max_length: int


def held_out_rows(train_rows: int) -> int:
    """LRA's ratio: ``train_rows // 48`` rows each for val and test, at least 1."""
    return max(1, train_rows // LRA_TRAIN_PER_HELD_OUT)


def check_writable(out: Path) -> None:
    """Create ``out`` if needed and check a file can be written there, before minutes of generation."""
    probe = out / f".write-check-{uuid.uuid4().hex[:8]}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise DataExportError(f"cannot write to the output folder {out}: {exc.strerror or exc}") from None


def export_listops(
    out: Path,
    rows: int,
    seed: int = 0,
    options: listops.ListOpsOptions | None = None,
    val_rows: int | None = None,
    test_rows: int | None = None,
    progress: TextIO | None = None,
) -> list[ExportedFile]:
    """Generate ``rows`` training rows and ``val_rows`` / ``test_rows`` held-out rows (default: LRA's ratio,
    :func:`held_out_rows`) and write them to ``out``. Progress goes to ``progress`` (a stream) for large
    exports. :class:`DataExportError` for bad values or an unwritable folder."""
    val_rows = held_out_rows(rows) if val_rows is None else val_rows
    test_rows = held_out_rows(rows) if test_rows is None else test_rows
    for name, value in (("--rows", rows), ("--val-rows", val_rows), ("--test-rows", test_rows)):
        if value < 1:
            raise DataExportError(f"{name} must be at least 1, but got {value}")
    try:
        options = options or listops.ListOpsOptions()
    except ValueError as exc:
        raise DataExportError(f"bad ListOps options: {exc}") from None
    check_writable(out)
    total = rows + val_rows + test_rows
    report = progress_reporter(progress) if progress is not None and total >= PROGRESS_FROM_ROWS else None
    try:
        splits = listops.generate_splits(options, seed, rows, val_rows, test_rows, report)
    except ValueError as exc:
        raise DataExportError(str(exc)) from None
    try:
        paths = listops.write_splits(out, splits)
    except OSError as exc:
        raise DataExportError(f"cannot write the ListOps files to {out}: {exc.strerror or exc}") from None
    return [
        ExportedFile(
            split,
            paths[split],
            len(splits[split]),
            min(row.length for row in splits[split]),
            max(row.length for row in splits[split]),
        )
        for split in listops.SPLITS
    ]


def progress_reporter(stream: TextIO):
    """A ``report(done, of)`` callback: one line redrawn in place on a terminal; in a log, a line about every
    tenth of the way (the generator calls it every 1,000 rows) and at the end."""
    started = time.perf_counter()
    live = stream.isatty()

    def report(done: int, of: int) -> None:
        step = max(1, of // 10_000) * 1000
        if not live and done % step and done != of:
            return
        elapsed = time.perf_counter() - started
        line = f"[data] listops: {done:,} / {of:,} rows, {elapsed:.0f}s, ~{elapsed / done * (of - done):.0f}s left"
        print(f"\r{line}  " if live else line, end="\n" if done == of or not live else "", file=stream)

    return report


def cmd_data_export(args) -> int:
    """The CLI's ``sweep data export listops``."""
    try:
        options = listops.ListOpsOptions(args.max_depth, args.max_args, args.min_length, args.max_length)
    except ValueError as exc:
        raise DataExportError(f"bad ListOps options: {exc}") from None
    files = export_listops(args.out, args.rows, args.seed, options, args.val_rows, args.test_rows, progress=sys.stderr)
    for file in files:
        print(f"wrote {file.path}: {file.rows:,} rows, lengths {file.min_length}-{file.max_length}")
    print(
        f"ListOps (LRA's grammar): max_depth {options.max_depth}, max_args {options.max_args}, "
        f"{options.min_length} < length < {options.max_length}, seed {args.seed}. Read them with "
        f"data: {{name: lra_listops, root: {args.out}, seq_len: {options.max_length}}}"
    )
    return 0
