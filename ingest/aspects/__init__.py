"""AspectCSE's sets (Schopf et al., RANLP 2023; docs/methods.md §5).

- ``validate.py``: Wikidata ids, language codes and wiki names checked before
  they enter a query or a path;
- ``sparql.py``: the aspect label table from a SPARQL endpoint (the Wikidata
  Query Service by default) through SPARQLWrapper: keyset paging, backoff that
  honours Retry-After, an on-disk JSON cache keyed by the query's hash;
- ``offline.py``: the same table from the ``wikidata`` set a dump ingest wrote;
- ``table.py``: the one function both routes build that table with;
- ``triplets.py``: ``aspect_triplets`` (single aspects, multi-aspect
  intersection and union) and ``aspect_docs`` from the labels and the
  ``intros`` set, built with Ray Data, split 80/20 by entity;
- ``pwc.py``: the Papers-with-Code aspect folds of Ostendorff et al. (2022)
  (``folds/{aspect}/{k}/{train,test}.csv`` + ``docs.jsonl``) as the same sets;
- ``__main__.py``: ``python -m ingest.aspects``.

The table both label routes return has the ``schemas.ASPECT_LABELS`` columns.
"""
