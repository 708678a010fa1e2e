"""Stage 5, the analysis: DuckDB views over the results (``sql.py`` with ``views/``' SQL and each question's),
``sweep report`` (``report/``) and the results in a notebook (``notebook.py``). Nothing here loads torch."""
