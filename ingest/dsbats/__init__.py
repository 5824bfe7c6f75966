"""DSBATS-sn (Zhang, Waseda 2023): sentence relationships from word analogies.

BATS 3.0 analogy pairs (``bats.py``) -> the senses of both words in a
semantic network (``ingest/semnet/``), filtered and chosen (``senses.py``) ->
pairs of definition sentences, one Ray Data actor per category at a time
(``definitions.py``) -> the seeded split, DSBATS4CL training rows and SRSD
test items (``contrastive.py``) -> the sets (``job.py``). CLI:
``python -m ingest.dsbats`` (``__main__.py``).
"""
