"""What a user sees when a command is given bad input: one error line (a space's problems one line each
under it), no traceback without --debug, exit status 2; and an error the tool did not expect is one line
too, exit 1, pointing at --debug."""

import pytest

import sweep.cli.parsers as parsers
from sweep.cli import main
from tests.helpers import trial_row, write_csv

HUB_STORIES_MISSING_TOKENIZER = """\
question: does a Hub TinyStories space name a tokenizer that is not there?
model: {family: gpt2, embed_dim: 32, mlp_dim: 64}
axes: {depth: [1, 2], num_heads: [2, 4]}
baseline: {depth: 2, num_heads: 4}
seeds: [0]
metric: {name: val_loss, mode: min, tolerance: 0.05}
data:
  name: tinystories
  seq_len: 32
  source: hub
  hub: {revision: 0123456789abcdef}
  text: {tokenizer: /nonexistent/tokenizer.json}
"""


@pytest.fixture
def bad_inputs(tmp_path):
    """Each: the command line, and a phrase its error line must hold."""
    space = tmp_path / "hub_stories.yaml"
    space.write_text(HUB_STORIES_MISSING_TOKENIZER)
    results = tmp_path / "results"
    from sweep.results.importer import import_file

    import_file(write_csv(tmp_path / "one.csv", [trial_row("one", 4, 4, 0, 90.0)]), results)
    return {
        "data fetch, missing tokenizer": (["data", "fetch", str(space)], "/nonexistent/tokenizer.json"),
        "validate, missing tokenizer": (["validate", str(space)], "does not exist"),
        "plan, unknown space": (["plan", "no_such_space"], "unknown space"),
        "run, bad seeds": (["run", "local_digits", "--seeds", "x", "--results", str(results)], "--seeds takes"),
        "sql, bad tolerance": (
            ["sql", "FROM vs_baseline", "--results", str(results), "--tolerance", "-1"],
            "--tolerance",
        ),
        "sql, bad query": (["sql", "SELEC 1", "--results", str(results)], "cannot parse"),
        "report, no trials": (
            ["report", "nothing", "--results", str(results), "--out", str(tmp_path / "r")],
            "no trials",
        ),
        "kappa-theory, no tokens": (["kappa-theory", "--tokens", "0", "--width", "8"], "positive whole numbers"),
        "import, missing file": (["import", str(tmp_path / "none.csv"), "--results", str(results)], "no such file"),
        "rerun, budget without inconclusive": (
            ["rerun", "local_digits", "--budget", "2", "--results", str(results)],
            "--budget goes with",
        ),
    }


def test_bad_input_gives_one_error_line_and_exit_2(bad_inputs, capsys):
    for case, (argv, phrase) in bad_inputs.items():
        assert main(argv) == 2, case
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert "Traceback" not in captured.err and "Traceback" not in captured.out, case
        assert lines and lines[0].startswith("error: "), (case, captured.err)
        assert all(line.startswith("  ") for line in lines[1:]), (case, captured.err)  # a space's problems, indented
        assert phrase in captured.err, (case, captured.err)


def test_an_unexpected_error_is_one_line_pointing_at_debug(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("something the tool did not plan for\nsecond line")

    monkeypatch.setattr(parsers, "cmd_spaces", broken)  # what `sweep spaces` calls
    assert main(["spaces"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: RuntimeError: something the tool did not plan for"
    assert len(err) == 2 and "--debug" in err[1]
    with pytest.raises(RuntimeError):
        main(["--debug", "spaces"])


def all_parsers(parser):
    """The parser and every subcommand's parser under it."""
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from all_parsers(sub)


def test_every_argument_of_every_command_has_help():
    missing = [
        f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
        for parser in all_parsers(parsers.build_parser())
        for action in parser._actions
        if not action.help and action.dest != "help" and not action.__class__.__name__.startswith("_SubParsers")
    ]
    assert missing == []


def test_sql_help_lists_every_analysis_view(capsys):
    import re

    from sweep.analysis.views import views_text

    created = set(re.findall(r"CREATE OR REPLACE VIEW (\w+)", views_text()))
    created -= {"trials", "epochs", "spaces", "kappa", "trials_files", "epochs_files", "spaces_files"}
    with pytest.raises(SystemExit):
        main(["sql", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert created and all(re.search(rf"\b{view}\b", text) for view in created), created
