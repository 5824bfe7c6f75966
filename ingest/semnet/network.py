"""What every semantic network gives (``SemanticNetwork``): the senses of a word (``Sense``) and whether
two senses stand in one of ``RELATIONS``. ``wordnet.py`` and ``babelnet.py`` implement it."""

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
