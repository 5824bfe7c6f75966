"""The set format, below every stage: what a set is and how it is read and written, for the jobs that write sets
(``ingest``) and the stages that read them (``score``, ``train``, ``eval``, ``tune``).

* ``setformat.schemas``: every set's parquet schema, declared once (``SCHEMAS``).
* ``setformat.io``: listing, pinned reads (pyarrow, no Ray; Ray Data datasets for jobs), the hashes every process
  groups rows by, atomic writes under deterministic names, manifests.
* ``setformat.integrity``: a set its job did not finish (or that changed since) refused in one line naming the job
  to rerun.

A set is a folder of ``*.parquet`` files and ``_manifest.json`` (docs/architecture.md).
"""
