"""A personal spaces folder (issue 38, point 4) through the CLI: with ``$SWEEP_SPACES_DIR`` a space extends a
shipped one, a personal space of a shipped name shadows it (``sweep spaces`` says so) and may extend the one it
shadows, and one bad file is listed with its problem while the rest are listed as usual (exit 2, one line on
stderr naming it). A YAML syntax error is one line: where, the rule, the fix."""

import pytest

from sweep.cli import main
from sweep.space.loader import package_spaces_dir
from sweep.space.model import SPACES_DIR_ENV

MINE = "extends: local_digits\nquestion: my own digits question\n"
SHADOW = "extends: local_digits\nquestion: the team's local_digits, shadowing the shipped one\n"
TABBED = "question: tabbed\naxes:\n\tdepth: [1, 2]\n"


@pytest.fixture
def personal(tmp_path, monkeypatch):
    folder = tmp_path / "team_spaces"
    folder.mkdir()
    (folder / "mine.yaml").write_text(MINE)
    monkeypatch.setenv(SPACES_DIR_ENV, str(folder))
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_personal_space_extends_a_shipped_one(personal, capsys):
    assert main(["validate", "mine"]) == 0
    assert capsys.readouterr().out.startswith("mine: valid (")
    assert main(["spaces"]) == 0
    out = capsys.readouterr().out
    assert "mine  (team_spaces/mine.yaml)\n    my own digits question" in out
    assert f"vit_b_fixed_mlp  ({package_spaces_dir() / 'vit_b_fixed_mlp.yaml'})" in out  # shipped ones stay
    assert "shadows" not in out


def test_a_personal_space_of_a_shipped_name_shadows_it_and_may_extend_it(personal, capsys):
    (personal / "local_digits.yaml").write_text(SHADOW)
    assert main(["spaces"]) == 0
    out = capsys.readouterr().out
    shipped = package_spaces_dir() / "local_digits.yaml"
    assert (
        "local_digits  (team_spaces/local_digits.yaml)\n"
        f"    shadows the shipped space local_digits ({shipped}); `extends: local_digits` starts from it\n"
        "    the team's local_digits, shadowing the shipped one"
    ) in out
    assert out.count("local_digits  (") == 1
    assert main(["validate", "local_digits"]) == 0  # extends the shipped one, not itself
    assert main(["spaces", "local_digits"]) == 0
    assert "shadows the shipped space local_digits" in capsys.readouterr().out


def test_one_bad_file_is_named_and_the_rest_are_listed(personal, capsys):
    (personal / "broken.yaml").write_text(TABBED)
    (personal / "lost.yaml").write_text("extends: no_such_space\nquestion: q\n")
    assert main(["spaces"]) == 2
    captured = capsys.readouterr()
    assert "mine  (team_spaces/mine.yaml)" in captured.out and "vit_b_fixed_mlp  (" in captured.out
    assert (
        "broken  (team_spaces/broken.yaml)\n    not a valid space: team_spaces/broken.yaml: line 3, column 1: a tab; "
        "fix: use spaces to indent (YAML does not allow tabs)"
    ) in captured.out
    lost = "lost  (team_spaces/lost.yaml)\n    not a valid space: team_spaces/lost.yaml: extends: must name"
    assert lost in captured.out
    assert "model families (model.family):" in captured.out
    assert captured.err.strip() == (
        "error: 2 space files could not be read (team_spaces/broken.yaml, team_spaces/lost.yaml); the others are "
        "listed; `sweep validate team_spaces/broken.yaml` shows every problem"
    )
    assert main(["spaces", "--names"]) == 2
    names = capsys.readouterr().out.split()
    assert "mine" in names and "local_digits" in names and "broken" not in names


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (TABBED, "line 3, column 1: a tab; fix: use spaces to indent (YAML does not allow tabs)"),
        ("question: x\n  axes: 1\n", "line 2, column 7: not valid YAML: mapping values are not allowed here; fix: "),
        ("question: x\naxes: {depth: [1]\nseeds: [0]\n", "line 3, column 1: not valid YAML: expected ',' or '}'"),
    ],
)
def test_a_yaml_syntax_error_is_one_line(tmp_path, capsys, text, line):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "error: invalid search space (1 problem):"
    assert len(err) == 2 and f"bad.yaml: {line}" in err[1]
