"""The questions a sweep can ask beyond "where does the trade break?", one module each (the interface:
``sweep/questions/base.py``; how to add one: ``docs/questions.md``).

:data:`QUESTIONS` is the registry that the space model (its sections), the plan, the validation, the SQL
loader (their views, in this order, after the core's), ``sweep plan`` and the report loop over, and from
whose declarations (:func:`declared_labels`, :func:`declared_axes`) the results schema, the sink, the
compat and configs views, the shapes and the plan's columns are derived. Adding a question is one module,
its SQL file, and one line here.
"""

from __future__ import annotations

from sweep.questions import budget, conditioning, controls, expectations, gqa, tuning
from sweep.questions.base import SHAPE_AXES, Axis, Label, Question

# One line per question, in the order their views load, their plan lines print and their sections appear.
QUESTIONS: list[Question] = [
    gqa.QUESTION,
    conditioning.QUESTION,
    budget.QUESTION,
    controls.QUESTION,
    expectations.QUESTION,
    tuning.QUESTION,
]


def sections() -> dict[str, Question]:
    """The questions that read a section of the space file, by that section's key."""
    return {q.section: q for q in QUESTIONS if q.section}


def declared_labels() -> list[Label]:
    """Every question's :class:`~sweep.questions.base.Label` columns, in registry order (read when called, so a
    test's question is seen): the order of their trials, configs and ``sweep plan`` columns."""
    return [label for q in QUESTIONS for label in q.labels]


def declared_axes() -> list[Axis]:
    """Every question's :class:`~sweep.questions.base.Axis`, in registry order (read when called, so a test's
    question is seen): the order of their trials, configs and ``sweep plan`` columns."""
    return [axis for q in QUESTIONS for axis in q.axes]


def axis_names() -> tuple[str, ...]:
    """The axes a shape is made of, as a space file names them (``axes:``, ``baseline:``, a published row's
    ``shape:``): the shape's own, then each question's declared axis."""
    return (*SHAPE_AXES, *(axis.name for axis in declared_axes()))
