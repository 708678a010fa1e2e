"""Stage 3, the run: Ray Tune over the plan (``tuner.py``) or an Optuna search (``search.py``), reruns with
more seeds (``rerun.py``, ``adaptive.py``), progress on the terminal (``progress.py``) and experiment trackers
(``trackers.py``)."""
