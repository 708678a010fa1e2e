"""Data for a trial: one module per data set, and the registry (``registry.py``) that lists them.

Nothing here downloads: data is embedded (digits), generated (ListOps, MQAR, a masked-LM corpus) or read from
a local root. ``base.py`` holds what every data set shares, ``splits.py`` and ``batches.py`` data held in
memory, ``loading.py`` the DataLoader side of data read from disk, ``cache.py`` and ``text.py`` helpers the
generated and text data sets share.
"""
