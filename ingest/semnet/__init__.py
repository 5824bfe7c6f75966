"""Semantic networks behind one interface: the senses of a word and the relations between senses.

DSBATS-sn (``ingest/dsbats/``) lifts every word of a BATS analogy pair to a
definition sentence. It needs, per word, the candidate senses with what the
slides filter on (named entity, capitalised lemma, degree) and, per sense
pair, whether the network relates them the way a BATS category does.

- ``wordnet.py``: WordNet 3.0 database files (``dict/``: ``index.*``, ``data.*``,
  ``*.exc``; Debian ``wordnet-base`` puts them in ``/usr/share/wordnet``) read
  by NLTK's ``WordNetCorpusReader``; nothing is downloaded.
- ``babelnet.py``: BabelNet's HTTP API (key from an environment variable,
  disk cache, backoff).

``open_network(spec)`` builds one from a JSON-able spec, so a Ray worker can
build its own: ``{"kind": "wordnet", "folder": "/usr/share/wordnet"}`` or
``{"kind": "babelnet", "url": ..., "key_env": "BABELNET_KEY", "cache": ...}``.
"""

from __future__ import annotations

from ingest.semnet.network import RELATIONS, SemanticNetwork, Sense

__all__ = ["RELATIONS", "SemanticNetwork", "Sense", "open_network"]


def open_network(spec: dict) -> SemanticNetwork:
    kind = spec.get("kind", "wordnet")
    if kind == "wordnet":
        from ingest.semnet.wordnet import WordNet

        return WordNet(spec["folder"])
    if kind == "babelnet":
        from ingest.semnet.babelnet import BabelNet

        return BabelNet(**{k: v for k, v in spec.items() if k != "kind"})
    raise ValueError(f"semantic network kind {kind!r}: expected wordnet or babelnet")
