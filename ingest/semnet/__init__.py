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

from dataclasses import dataclass
from typing import Protocol

# Relations a BATS category can ask for, read "second is a <relation> of first"
# (e.g. ``hypernym``: L01 dog -> animal; ``part_holonym``: E01 paris -> france).
RELATIONS = (
    "hypernym",  # transitive, through instance hypernyms too
    "hyponym",  # transitive
    "part_meronym", "part_holonym", "member_meronym", "member_holonym",
    "substance_meronym", "substance_holonym",
    "similar",  # different senses close in meaning: similar-to, also-see, verb group, shared direct hypernym
    "antonym",  # a lemma antonym, directly or through a similar-to satellite (WordNet's indirect antonyms)
)


@dataclass(frozen=True)
class Sense:
    id: str  # dog.n.01 (WordNet) / bn:00015267n (BabelNet)
    word: str  # the word it was looked up with
    pos: str  # n, v, a, r
    definition: str
    lemmas: tuple[str, ...]
    rank: int  # 0 = the word's most frequent sense (WordNet's sense order)
    group: str  # coarse semantic class: WordNet's lexicographer file (noun.animal), BabelNet's category
    named_entity: bool  # WordNet: an instance synset; BabelNet: synsetType NAMED_ENTITY
    capitalised: bool  # the lemma matching the word is capitalised (a proper noun)
    degree: int  # number of semantic relations of the sense in the network


class SemanticNetwork(Protocol):
    name: str  # e.g. wordnet-3.0, recorded in manifests

    def senses(self, word: str) -> list[Sense]:
        """Every sense of ``word`` (BATS spelling: lower case, ``_`` for spaces), most frequent first."""

    def related(self, first: Sense, second: Sense, relation: str) -> bool:
        """Whether the network relates ``second`` to ``first`` by ``relation`` (one of ``RELATIONS``)."""


def open_network(spec: dict) -> SemanticNetwork:
    kind = spec.get("kind", "wordnet")
    if kind == "wordnet":
        from ingest.semnet.wordnet import WordNet

        return WordNet(spec["folder"])
    if kind == "babelnet":
        from ingest.semnet.babelnet import BabelNet

        return BabelNet(**{k: v for k, v in spec.items() if k != "kind"})
    raise ValueError(f"semantic network kind {kind!r}: expected wordnet or babelnet")
