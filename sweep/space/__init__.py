"""Stage 1, the space: a space file read (``loader.py``: shipped or by path, recipes and profiles merged),
its schema (``model.py``: pydantic, unknown keys rejected, each question's section from the registry) and
every problem of it reported together (``validation.py``)."""

SPACES_DIR_ENV = "SWEEP_SPACES_DIR"  # a personal folder of spaces, searched before the shipped ones (loader.py)
