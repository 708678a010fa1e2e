"""The driver's exceptions. Each carries a message a person can act on; the CLI prints it on one line
(the traceback only with ``--debug``) and exits with the exception's ``exit_code``."""

from __future__ import annotations

from dataclasses import dataclass


class SweepError(Exception):
    """Base of every error the driver reports to a user."""

    exit_code = 1


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config file: where, which rule, what value, and how to fix it."""

    file: str
    path: str  # dotted key path, e.g. ``axes.num_heads[2]``
    rule: str
    value: object
    fix: str
    note: bool = False  # worth saying, not wrong: the space still runs (an axis value the rules remove)

    def __str__(self) -> str:
        value = "" if self.value is _MISSING else f" (got {self.value!r})"
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{'note: ' if self.note else ''}{self.file}: {self.path or '<top level>'}: {self.rule}{value}{fix}"


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


class SpaceError(SweepError):
    """A search space is invalid. Holds every issue found, not only the first."""

    exit_code = 2

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = issues
        problems, notes = sum(not i.note for i in issues), sum(i.note for i in issues)
        count = f"{problems} problem{'s' if problems != 1 else ''}" + (
            f"; {notes} note{'s' if notes != 1 else ''}" if notes else ""
        )
        ordered = sorted(issues, key=lambda issue: issue.note)  # the problems first, then the notes
        super().__init__(f"invalid search space ({count}):\n" + "\n".join(f"  {issue}" for issue in ordered))


class UsageError(SweepError):
    """A command's argument or option that cannot be used as given (``--seeds x``, ``--tolerance -1``, a space
    with no trials to report); the message says what to give instead."""

    exit_code = 2


class UnknownSpaceError(SweepError):
    exit_code = 2


class DataUnavailableError(SweepError):
    """The space's data set is not on this machine; the message says how to get going anyway."""

    exit_code = 2


class DataLoadError(SweepError):
    """The space's data set is on this machine but cannot be read as that data set (a malformed or unsafe
    file); the message names the file and what is wrong with it."""

    exit_code = 2


class TrackerUnavailableError(SweepError):
    """``--log`` / ``log:`` asks for an experiment tracker whose package does not import here; the message
    names the ``pip install`` that brings it. Raised before Ray starts, so no trial has run."""

    exit_code = 2


class ResultsError(SweepError):
    """The results folder cannot be read or written."""


class QueryError(SweepError):
    """An analyst's SQL was rejected or failed."""

    exit_code = 2


class ImportRejected(SweepError):
    """``sweep import``: the file was rejected whole (nothing written); the message lists every bad row."""

    exit_code = 2


class DataExportError(SweepError):
    """``sweep data``: bad export options or an unwritable folder."""

    exit_code = 2


class DoctorError(SweepError):
    """``sweep doctor``: the results folder cannot be checked (it does not exist, or is not a folder)."""

    exit_code = 2


class SweepLocked(SweepError):
    """Another ``sweep run``/``rerun`` of the same space holds the results folder's lock."""

    exit_code = 3


MISSING = _MISSING


class SweepInterrupted(SweepError):
    """Ctrl-C stopped a sweep; what it recorded stays, and the same command runs what is missing. The CLI prints
    the message as it is (no ``error:``) and exits 130, as a shell does for SIGINT."""

    exit_code = 130

    def __init__(self, recorded: int):
        self.recorded = recorded
        trials = "trial" if recorded == 1 else "trials"
        super().__init__(f"interrupted: {recorded} {trials} recorded; run the same command to continue")
