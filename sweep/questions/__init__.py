"""The questions a sweep can ask beyond "where does the trade break?", one module each (the interface:
``sweep/questions/base.py``; how to add one: ``docs/questions.md``).

:data:`QUESTIONS` is the registry that the space model (its sections), the plan, the validation, the SQL
loader (their views, in this order, after the core's), ``sweep plan`` and the report loop over. Adding a
question is one module, its SQL file, and one line here.
"""

from __future__ import annotations

from sweep.questions import budget, conditioning, controls, expectations, gqa
from sweep.questions.base import Question

# One line per question, in the order their views load, their plan lines print and their sections appear.
QUESTIONS: list[Question] = [
    gqa.QUESTION,
    conditioning.QUESTION,
    budget.QUESTION,
    controls.QUESTION,
    expectations.QUESTION,
]


def sections() -> dict[str, Question]:
    """The questions that read a section of the space file, by that section's key."""
    return {q.section: q for q in QUESTIONS if q.section}
