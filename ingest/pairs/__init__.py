"""Pair-corpus ingest: sentence-pair corpora -> ``nli_triplets`` and ``relation_triples``.

Sources (``PairSource``), chosen by config:

- ``senteval``: SentEval's ``s1.<split>``, ``s2.<split>``, ``labels.<split>``
  (line i of the three files is one pair), e.g. SentEval's ``data/downstream/SNLI``
  or the demo world's ``nli/`` folder;
- ``simcse_csv``: SimCSE's ``nli_for_simcse.csv`` (header ``sent0,sent1,hard_neg``:
  premise, entailment, contradiction; a file without ``hard_neg`` gives
  entailment pairs only);
- ``table``: a local jsonl / json (a list of objects) / csv / tsv file (``.gz``
  and ``.bz2`` too), with a column mapping ``{"sentence1": ..., "sentence2": ...,
  "label": ...}`` (or ``"captions"``: a list column whose members are pairwise
  related) and a label map, or one fixed ``relation`` for every pair;
- ``hf``: ``datasets.load_dataset(path, name, split=split)``: a hub dataset
  (``stanfordnlp/snli``, ``nyu-mll/multi_nli`` / glue mnli, glue qqp, quora,
  paws, glue qnli, flickr30k captions, ``sentence-transformers/all-nli``'s
  ``triplet`` (the default), ``pair`` and ``pair-class`` configs: their
  columns and label names are known, see ``PRESETS``) or a local folder /
  builder (``json``, ``csv``) with an explicit ``preset`` or ``columns`` +
  ``label_map``. ``STRUCTCSE_HUB_COPIES=FOLDER`` reads a hub name from
  ``FOLDER/<owner>/<name>`` (``infra.hub_data``); offline, a name neither
  copied nor cached is one line naming it.

A label map takes a raw label (compared as text, then case-insensitively) to a
relation, or to ``None``: the row is dropped as ``excluded_label`` (SNLI's
``-``, PAWS's non-paraphrases); a label not in the map is dropped as
``unknown_label``. Relation names follow RSE: entailment, neutral,
contradiction, duplicate_question, non_duplicate_question, paraphrase,
same_caption, qa_entailment, qa_not_entailment.

The package, by concern:

- ``labels.py``: label maps and relation names (no Ray, no pyarrow);
- ``sources.py``: ``PairSource``, ``PRESETS``, ``PairIngestConfig`` and the
  driver's check of every source before any Ray work;
- ``readers.py``: stage 1, one Ray task per unit in its format (SentEval,
  SimCSE csv, jsonl/json/csv/tsv tables, hub dataset chunks) -> pair units;
- ``negatives.py``: stages 2–4, grouping by premise (nli_triplets, same-premise
  hard negatives), per-relation caps, random in-relation hard negatives;
- ``output.py``: stage 5, the parquet files of both sets and their manifests;
- ``job.py``: ``run_pair_ingest``, the Ray Data job that runs the stages;
- ``cli.py`` / ``__main__.py``: ``python -m ingest.pairs``.

Set I/O (reading, hash buckets, grouped Ray Data work, atomic writes,
manifests) is ``setformat/io.py``. Importing this package is light: the
names below load their module (and Ray, for the job) on first use.
"""

from __future__ import annotations

import importlib

from setformat.labels import NLI_INT_LABELS, NLI_RELATIONS, NLI_TEXT_LABELS, RSE_RELATIONS

_LAZY = {
    "KINDS": "sources", "PRESETS": "sources", "HF_ALIASES": "sources", "Preset": "sources",
    "PairSource": "sources", "PairIngestConfig": "sources", "PairSourceError": "sources",
    "run_pair_ingest": "job",
    "parse_source": "cli", "parse_args": "cli", "build_parser": "cli", "main": "cli", "SOURCE_HELP": "cli",
}

__all__ = ["NLI_INT_LABELS", "NLI_RELATIONS", "NLI_TEXT_LABELS", "RSE_RELATIONS", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"ingest.pairs.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ingest.pairs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
