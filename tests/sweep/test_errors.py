"""The driver's errors (sweep/errors.py): a config issue in one line, every issue of a space together."""

from sweep.errors import _MISSING as MISSING
from sweep.errors import ConfigIssue, SpaceError, SweepError, UsageError


def test_a_config_issue_says_where_the_rule_the_value_and_the_fix():
    issue = ConfigIssue("s.yaml", "axes.num_heads[2]", "must divide embed_dim", 5, "use 4 or 8")
    assert str(issue) == "s.yaml: axes.num_heads[2]: must divide embed_dim (got 5); fix: use 4 or 8"
    assert str(ConfigIssue("s.yaml", "", "needs a question", MISSING, "")) == "s.yaml: <top level>: needs a question"
    assert str(ConfigIssue("s.yaml", "x", "dropped", 3, "", note=True)).startswith("note: s.yaml: x: dropped")


def test_a_space_error_counts_problems_and_notes_and_lists_the_problems_first():
    note = ConfigIssue("s.yaml", "a", "removed by a rule", 1, "", note=True)
    problems = [ConfigIssue("s.yaml", "b", "bad", 2, ""), ConfigIssue("s.yaml", "c", "bad", 3, "")]
    error = SpaceError([note, *problems])
    lines = str(error).splitlines()
    assert lines[0] == "invalid search space (2 problems; 1 note):"
    assert lines[1:] == [
        "  s.yaml: b: bad (got 2)",
        "  s.yaml: c: bad (got 3)",
        "  note: s.yaml: a: removed by a rule (got 1)",
    ]
    assert str(SpaceError(problems[:1])).startswith("invalid search space (1 problem):")
    assert error.exit_code == UsageError("x").exit_code == 2 and SweepError.exit_code == 1
    assert isinstance(error, SweepError) and error.issues[0] is note
