"""Stage 4, the results: the Parquet tables' columns (``schema.py``), each finished trial written as rows
(``sink.py``), local folders and object storage (``storage.py``), compaction (``compact.py``), rows made
elsewhere (``importer.py``), checks (``doctor.py``) and data exports (``data_export.py``)."""
