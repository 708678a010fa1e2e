"""The text pipeline the language data sets share, in the order it runs:

- :mod:`~workers.data.text.documents`: where documents come from (a text file per split, a ``save_to_disk``
  folder, the Hub, or generated) and what a cache key sees of them;
- :mod:`~workers.data.text.tokenizer`: the tokenizer, read from a ``tokenizer.json`` or trained here by a
  recipe (byte-level BPE, WordPiece) and cached;
- :mod:`~workers.data.text.streams`: documents encoded into one token stream per split, cut into windows
  (next-token or non-overlapping), the streams cached.

A data set (``workers/data/tinystories.py``, ``workers/data/mlm_corpus.py``) keeps only its spec: its files,
its tokenizer recipe and special tokens, its separator, its packing (and, for masked LM, its masking).
"""
