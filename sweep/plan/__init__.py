"""Stage 2, the plan: every config a space asks for, measured without training (``plan.py``: shapes, exact
params and FLOPs, each question's additions), named by a content hash (``identity.py``), and what Theorem 3.2
predicts for its shapes (``theory.py``)."""
