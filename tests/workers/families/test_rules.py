"""workers/families/rules.py: each family's rules are the ones its Family checks with, are read without
importing the family's module, and word each problem with the field, the rule and the fix."""

import subprocess
import sys

import pytest

from workers.config import ModelSpec
from workers.families import FAMILY_MODULES
from workers.families.rules import FAMILY_RULES, family_problems
from workers.models import get_family


def test_every_registered_family_has_rules_and_its_family_uses_them():
    assert set(FAMILY_RULES) == set(FAMILY_MODULES)
    for name, rules in FAMILY_RULES.items():
        family = get_family(name)
        assert (family.accepts, family.check, family.modality) == (rules.accepts, rules.check, rules.modality)


@pytest.mark.parametrize("name", sorted(FAMILY_MODULES))
def test_the_rules_find_what_the_family_finds(name):
    """A field the family does not take, or a broken rule between fields, is the same problem either way."""
    family = get_family(name)
    example = family.example_spec()
    assert family_problems(name, example) == family.problems(example) == []
    wrong = ModelSpec(**{**example.model_dump(exclude_none=True), "head_dim": 3, "inner_heads": 3})
    found = family_problems(name, wrong)
    assert found == family.problems(wrong) and found
    assert all(p.fix and p.rule for p in found)


def test_reading_the_rules_imports_no_model_library():
    code = (
        "import sys; from workers.families.rules import FAMILY_RULES; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'timm', 'transformers')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr
