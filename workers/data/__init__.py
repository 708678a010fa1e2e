"""Data for a trial: one module per data set, and the registry (``registry.py``) that lists them.

Data is embedded (digits), generated (ListOps, MQAR, a masked-LM corpus), read from a local root, or read
from the Hugging Face Hub's cache (``data.source: hub``, ``hub.py``). Nothing downloads by surprise: only
``sweep data fetch`` (a data set's ``fetch``) downloads, into that cache; a trial that lacks its data fails in
one line. ``base.py`` holds what every data set shares, ``splits.py`` and ``batches.py`` data held in memory,
``loading.py`` the DataLoader side of data read from disk, ``cache.py`` and ``text/`` helpers the generated
and text data sets share.
"""
