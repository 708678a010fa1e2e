"""The commands the tool prints for a person to paste (``sweep sql …``, ``sweep report …``, ``sweep rerun …``), each
carrying the options the person gave, so that it runs exactly as printed from any working folder:

- ``--results``: the results location, a folder made absolute (an object-store prefix as given, its query too);
- the space as a command must name it: a shipped space by its name; a space given by path, or found by name in
  the working folder's ``search_spaces/``, by its file's absolute path (``make rerun SPACE=<name>`` and
  ``sweep rerun <name>`` elsewhere would answer "unknown space");
- ``--profile``, on the commands that take one (run, rerun, kappa-theory).

``sweep run`` and ``sweep rerun`` build theirs from their arguments, the report from the space it was given (a
name, or a space file's path) and the profile its latest sweep recorded.
"""

from __future__ import annotations

import importlib.resources
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

SPACES_DIR_ENV = "SWEEP_SPACES_DIR"  # as sweep/space/model.py's (importing it would load the model families)


def is_space_file(space: str) -> bool:
    """Whether ``space`` names a file, as ``sweep/space/loader.py``'s ``find_space`` decides."""
    path = Path(space)
    return path.suffix in (".yaml", ".yml") or path.is_file()


def space_name(space: str) -> str:
    """The name results record for ``space``: a file's stem, or the name given."""
    return Path(space).stem if is_space_file(space) else space


def shipped_space_file(name: str) -> Path | None:
    """The shipped space of that name (package data), or None."""
    try:
        folder = Path(str(importlib.resources.files("search_spaces")))
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parent.parent.parent / "search_spaces"
    path = folder / f"{name}.yaml"
    return path.resolve() if path.is_file() else None


def space_argument(space: str) -> tuple[str, bool]:
    """``space`` as a printed command names it, and whether that names a space from any folder. A file, or a
    name found in the working folder's ``search_spaces/`` (not the shipped one), by its absolute path; a shipped
    name, or one ``$SWEEP_SPACES_DIR`` holds, by name; a name found nowhere (a space run from a file, reported by
    its name) as it is, flagged."""
    if is_space_file(space):
        return str(Path(space).resolve()), True
    if os.environ.get(SPACES_DIR_ENV):
        return space, (Path(os.environ[SPACES_DIR_ENV]) / f"{space}.yaml").is_file()
    local, shipped = Path("search_spaces", f"{space}.yaml"), shipped_space_file(space)
    if local.is_file() and local.resolve() != shipped:
        return str(local.resolve()), True
    return space, shipped is not None


def results_argument(results) -> str:
    """The ``--results`` value that reaches the same results from any folder: a folder made absolute; an
    object-store prefix (``sweep/results/storage.py``'s ``ObjectStore``) with its query."""
    if hasattr(results, "scheme") and hasattr(results, "root"):
        return f"{results.scheme}://{results.root}" + (f"?{results.query}" if getattr(results, "query", "") else "")
    return str(Path(results).resolve())


def quoted(text: str) -> str:
    return shlex.quote(text)


@dataclass(frozen=True)
class Hints:
    """Printed commands for one space and results location (see the module docstring). ``space``: as a command
    names it; ``known``: whether that name finds the space from any folder (False: a space run from a file and
    reported by name, whose file the results do not record)."""

    space: str
    results: str
    profile: str | None = None
    known: bool = True

    @classmethod
    def given(cls, space: str, results, profile: str | None = None) -> Hints:
        argument, known = space_argument(space)
        return cls(argument, results_argument(results), profile, known)

    @property
    def name(self) -> str:
        return space_name(self.space)

    @property
    def space_words(self) -> str:
        """The space in a command: its name or path, or for a space no name finds a placeholder a person fills."""
        return quoted(self.space) if self.known else f"PATH/TO/{self.space}.yaml"

    def with_results(self) -> str:
        return f"--results {quoted(self.results)}"

    def with_profile(self) -> str:
        return f" --profile {quoted(self.profile)}" if self.profile else ""

    def sql(self, query: str) -> str:
        """``sweep sql "QUERY" --results DIR`` (queries hold no double quote)."""
        return f'sweep sql "{query}" {self.with_results()}'

    def report(self) -> str:
        return f"sweep report {self.space_words} {self.with_results()}"

    def rerun(self, options: str = "") -> str:
        return self.launch("rerun", options)

    def run(self, options: str = "") -> str:
        return self.launch("run", options)

    def launch(self, command: str, options: str) -> str:
        """``sweep run|rerun SPACE [--profile P] OPTIONS --results DIR``."""
        words = [f"sweep {command} {self.space_words}{self.with_profile()}", options.strip(), self.with_results()]
        return " ".join(word for word in words if word)

    def kappa_theory(self) -> str:
        return f"sweep kappa-theory --space {self.space_words}{self.with_profile()}"

    def unknown_note(self) -> str:
        """Said beside a command with the placeholder: why the space is not named (empty when it is)."""
        return "" if self.known else f" (with the path of {self.space}'s space file: it is not a shipped space)"

    def carry(self, markdown: str) -> str:
        """``markdown`` with every command in a code span given these options: ``sweep sql "…"`` its
        ``--results``; ``sweep rerun NAME …`` and ``sweep kappa-theory --space NAME`` the space as :attr:`space`
        names it, the profile and (rerun) the results. The report's own sentences build theirs with the methods
        above; a question's section (``sweep/questions/``, a floor below, which never sees the results location)
        writes its commands with the recorded name, and the report carries them through here."""

        def sql(match: re.Match) -> str:
            return f"`{self.sql(match[1])}`"

        def rerun(match: re.Match) -> str:
            return f"`{self.rerun(match[1].strip())}`"

        name = re.escape(self.name)
        markdown = re.sub(r'`sweep sql "([^"`]*)"`', sql, markdown)
        markdown = re.sub(rf"`sweep rerun {name}((?: [^`]*)?)`", rerun, markdown)
        return markdown.replace(f"`sweep kappa-theory --space {self.name}`", f"`{self.kappa_theory()}`")
