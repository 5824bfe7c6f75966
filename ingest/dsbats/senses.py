"""Which senses of a BATS pair's two words become its definition sentences.

Filters (the slides, "Filtering process"), applied to each word's senses:

1. **named entities** dropped (WordNet instance synsets: Queen the band for
   *queen*);
2. **capitalised lemmas** dropped (proper nouns: Acrobat the software for
   *acrobat*);
3. **low degree** dropped: a sense with fewer than ``min_degree`` semantic
   relations in the network is a rarely used one.

Filters 1 and 2 are there to keep a common word's common senses. A word
*every* sense of which is a name (*paris*, *einstein*: E01–E05 are made of
them) has no common sense to keep, and dropping its names would drop the
encyclopedic categories wholesale; with ``names_when_only_sense`` (default)
such a word keeps its names, and the manifest counts how many words did.
``names_when_only_sense: false`` is the literal reading.

Sense choice (``senses: one``, default), for a pair (word, answer) with the
surviving senses S₁ and S₂, in this order:

1. ``relation``: the category has a network relation (``CATEGORY_RELATIONS``:
   L01 dog → animal is a hypernym, L04 beach → sand a substance meronym,
   L09 hot → cold an antonym, E01 paris → france a part holonym, ...) and
   some (s₁, s₂) ∈ S₁×S₂ is related by it: the network itself says these two
   senses stand in the category's relationship. Among such pairs, the most
   frequent (smallest rank sum, then smallest rank of s₁).
2. ``gloss``: otherwise, a sense pair where one definition names the other
   word (or a lemma of the other sense): Lesk's (1986) gloss overlap, the
   classic dictionary-only disambiguation — *bark* → "the sound made by a
   dog", *cluck* → "the sound made by a hen". Among such pairs, the one whose
   senses' classes are the most common in the cluster (rule 3's tally: the
   gloss picks the named word, not its sense), then the most frequent.
3. ``cluster_group``: otherwise each side on its own takes the sense whose
   coarse class (WordNet's lexicographer file) is the most common one on that
   side across the whole cluster — each line's word counting each of its
   classes once —, ties broken by frequency. In E07 animal - sound the
   answers' senses are mostly ``noun.communication`` (the sound made by a
   dog), so *bark* gets that sense rather than its most frequent one (tree
   bark, ``noun.plant``). A cluster is a relationship, and the senses that
   share a class across it are the ones that carry it.
4. ``most_frequent``: where the class tally does not change the choice, it
   IS the most frequent surviving sense of each word; the rule says so.

A pair whose two chosen definitions are the same text (a synonym pair in one
synset) carries no relationship (its offset is zero) and is dropped as
``same_definition``; rules 1–3 never choose such a pair when another one
exists (rules 1–3). ``senses: all`` writes every (s₁, s₂) ∈ S₁×S₂ with distinct
definitions instead (rule ``all``). The slides' DSBATS-sn sizes are not those of
this enumeration over WordNet (0.13× to 6.3× of them per category; E01, E02 and
E04 empty with the literal name filter): they point to BabelNet's sense
inventory, which the figures are drawn from (docs/methods.md §6d).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass

from ingest.semnet import Sense

CATEGORY_RELATIONS = {
    "E01": "part_holonym",  # country - capital: abuja -> nigeria
    "E03": "part_holonym",  # UK city - county
    "L01": "hypernym", "L02": "hypernym", "L03": "hyponym",
    "L04": "substance_meronym", "L05": "member_holonym", "L06": "part_meronym",
    "L07": "similar", "L08": "similar",
    "L09": "antonym", "L10": "antonym",
}


@dataclass
class SenseConfig:
    senses: str = "one"  # one: a definition chosen per side | all: every surviving sense pair
    drop_named_entities: bool = True
    drop_capitalised: bool = True
    min_degree: int = 2  # 1 = a sense whose only relation is its hypernym (dog: 'informal term for a man')
    names_when_only_sense: bool = True

    def validate(self) -> "SenseConfig":
        if self.senses not in ("one", "all"):
            raise ValueError(f"senses: {self.senses!r} — expected one or all")
        if not isinstance(self.min_degree, int) or self.min_degree < 0:
            raise ValueError(f"min_degree: {self.min_degree!r} — expected an integer >= 0")
        return self

    def as_dict(self) -> dict:
        return asdict(self)


def surviving(senses: list[Sense], cfg: SenseConfig) -> tuple[list[Sense], str | None, bool]:
    """``(kept senses, drop reason or None, kept names because nothing else)``."""
    if not senses:
        return [], "no_synset", False
    common = [s for s in senses if not (cfg.drop_named_entities and s.named_entity)
              and not (cfg.drop_capitalised and s.capitalised)]
    names_only = not common
    if names_only:
        if not cfg.names_when_only_sense:
            return [], "only_names", False
        common = senses
    kept = [s for s in common if s.degree >= cfg.min_degree]
    return (kept, None, names_only) if kept else ([], "low_degree", names_only)


def group_tally(sides: list[list[Sense]]) -> Counter:
    """How many of a cluster's words have a sense in each class (a word counts each class once)."""
    tally: Counter = Counter()
    for senses in sides:
        tally.update({s.group for s in senses})
    return tally


_WORD = re.compile(r"[a-z0-9]+")


def _names(sense: Sense, word: str) -> set[str]:
    """The words that name ``sense``: the looked-up word and its lemmas (multiword ones whole)."""
    return {n.lower().replace("_", " ") for n in (word, *sense.lemmas)}


def mentions(definition: str, names: set[str]) -> bool:
    text = " " + " ".join(_WORD.findall(definition.lower())) + " "
    return any(f" {n} " in text for n in names)


def glosses(sense: Sense, other: Sense) -> bool:
    """``sense``'s definition names ``other`` (its word or a lemma) by a name that is not also ``sense``'s own:
    *father* "a male parent (also ... your father)" does not name *beget* "make children" although
    *father* is one of beget's lemmas."""
    return mentions(sense.definition, _names(other, other.word) - _names(sense, sense.word))


def _coherent(senses: list[Sense], tally: Counter) -> Sense:
    return min(senses, key=lambda s: (-tally[s.group], s.rank))


# synonyms - intensity, synonyms - exact: two words in one synset are the category's reading, and one
# definition twice carries no relationship: such a pair is dropped (``same_synset``), never given two
# unrelated senses instead (airplane:plane -> "cut or remove with a plane")
SYNONYM_CATEGORIES = ("L07", "L08")


def shares_synset(first: list[Sense], second: list[Sense]) -> bool:
    return bool({s.id for s in first} & {s.id for s in second})


def choose(first: list[Sense], second: list[Sense], relation: str | None, related, tally1: Counter,
           tally2: Counter) -> list[tuple[Sense, Sense, str]]:
    """``[(s₁, s₂, rule)]`` for one pair under ``senses: one`` (see the module docstring);
    ``related(s₁, s₂, relation) -> bool`` is the network's. Empty: every choice has one definition."""
    distinct = [(a, b) for a in first for b in second if a.definition != b.definition]
    if not distinct:
        return []
    if relation:
        linked = [(a, b) for a, b in distinct if related(a, b, relation)]
        if linked:
            a, b = min(linked, key=lambda p: (p[0].rank + p[1].rank, p[0].rank))
            return [(a, b, "relation")]
    glossed = [(a, b) for a, b in distinct if glosses(a, b) or glosses(b, a)]
    if glossed:
        # the named side's sense is not what the gloss decides: the cluster's classes do
        a, b = min(glossed, key=lambda p: (-tally1[p[0].group] - tally2[p[1].group], p[0].rank + p[1].rank))
        return [(a, b, "gloss")]
    a, b = _coherent(first, tally1), _coherent(second, tally2)
    top = (min(first, key=lambda s: s.rank), min(second, key=lambda s: s.rank))
    rule = "most_frequent" if (a, b) == top else "cluster_group"
    if a.definition == b.definition:
        a, b = min(distinct, key=lambda p: (-tally1[p[0].group] - tally2[p[1].group], p[0].rank + p[1].rank))
        rule = "cluster_group"
    return [(a, b, rule)]


def all_pairs(first: list[Sense], second: list[Sense]) -> list[tuple[Sense, Sense, str]]:
    return [(a, b, "all") for a in first for b in second if a.definition != b.definition]
