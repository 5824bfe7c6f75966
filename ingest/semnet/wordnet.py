"""WordNet 3.0 as a ``SemanticNetwork``: the database files of a local ``dict/`` folder read by NLTK.

The folder is the standard WordNet database (``index.{noun,verb,adj,adv}``,
``data.*``, ``*.exc``; Debian's ``wordnet-base`` installs it in
``/usr/share/wordnet``), read by NLTK's ``WordNetCorpusReader``; nothing is
ever downloaded. Two things stand between that folder and the reader:

- NLTK >= 3.9 sandboxes file access (``nltk/pathsec.py``): a reader root
  outside ``nltk.data.path`` is refused ("Unauthorized path"). The folder the
  user configured is appended to ``nltk.data.path`` (that folder only).
- Debian's ``wordnet-base`` has no ``lexnames`` file, which the reader opens at
  init. The 45 lexicographer file names are fixed by WordNet 3.0 (lexnames(5WN));
  ``_Reader`` serves that table from memory when the folder lacks the file (a
  folder's own ``lexnames`` wins), and never writes into the folder.

What a ``Sense`` holds, exactly:

- ``rank``: WordNet's sense order within a part of speech (NLTK's ``synsets()``
  order, by tagged frequency). Across parts of speech the per-POS lists are
  merged by the tag count (``cntlist.rev``) of the lemma matching the word, so
  each POS keeps its own order; ties (and every sense when the folder has no
  ``cntlist.rev``) go n, v, a, r. So "cold" starts with the adjective (count 35)
  before the noun (5).
- ``degree``: the synset's pointers in the data file: every synset-level relation
  in ``SYNSET_RELATIONS`` plus every lemma-level relation in ``LEMMA_RELATIONS``
  of each of its lemmas (antonyms, derivations, pertainyms, lexical also-see ...),
  counted through NLTK's public methods; equal to the data line's ``p_cnt`` for
  the synsets checked (dog.n.01: 23).
- ``capitalised``: every lemma of the synset matching the word (case-insensitive,
  after morphy) is spelt with a capital (``Paris``, ``Mercury``); ``named_entity``:
  the synset has an instance hypernym (WordNet's instances: people, places ...).
- ``pos``: n, v, a, r (adjective satellites ``s`` are reported as ``a``).
"""

from __future__ import annotations

import io
import threading
import warnings
from pathlib import Path

import nltk
from nltk.corpus.reader.wordnet import WordNetCorpusReader

from ingest.semnet.network import RELATIONS, Sense

# The lexicographer files of WordNet 3.0 (lexnames(5WN)); the third column of NLTK's
# ``lexnames`` is the syntactic category (1 noun, 2 verb, 3 adjective, 4 adverb).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling",
    "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon",
    "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape",
    "noun.state", "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
    "verb.communication", "verb.competition", "verb.consumption", "verb.contact", "verb.creation",
    "verb.emotion", "verb.motion", "verb.perception", "verb.possession", "verb.social", "verb.stative",
    "verb.weather", "adj.ppl",
)
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
LEXNAMES_TABLE = "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))

REQUIRED = tuple(f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")) + tuple(
    f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv"))
POS_ORDER = ("n", "v", "a", "r")

SYNSET_RELATIONS = (
    "hypernyms", "instance_hypernyms", "hyponyms", "instance_hyponyms",
    "member_holonyms", "substance_holonyms", "part_holonyms",
    "member_meronyms", "substance_meronyms", "part_meronyms",
    "attributes", "entailments", "causes", "also_sees", "verb_groups", "similar_tos",
    "topic_domains", "region_domains", "usage_domains",
    "in_topic_domains", "in_region_domains", "in_usage_domains",
)
LEMMA_RELATIONS = SYNSET_RELATIONS + ("antonyms", "derivationally_related_forms", "pertainyms")
_DIRECT = {"part_meronym", "part_holonym", "member_meronym", "member_holonym", "substance_meronym",
           "substance_holonym"}


class _Reader(WordNetCorpusReader):
    """NLTK's reader with the WordNet 3.0 ``lexnames`` table in memory when the folder has none,
    and without the OMW version mapping (which would look for NLTK's downloaded ``wordnet``)."""

    def open(self, file):
        if file == "lexnames" and not Path(self.root.path, "lexnames").is_file():
            return io.StringIO(LEXNAMES_TABLE)
        return super().open(file)

    def map_wn(self, version="wordnet"):
        return None


def _allow(folder: Path) -> None:
    """Let NLTK's path sandbox read ``folder``: append it (only it) to ``nltk.data.path``."""
    if not any(str(p) == str(folder) for p in nltk.data.path):
        nltk.data.path.append(str(folder))


class WordNet:
    """WordNet 3.0 from a local database folder. One instance per process (Ray worker):
    construction reads the index files (about a second); calls are serialised by a lock,
    since NLTK's reader shares open file handles; senses are cached per instance."""

    def __init__(self, folder: str | Path, max_depth: int = 20):
        self.folder = Path(folder).expanduser().resolve()
        self.max_depth = max_depth  # bound on hypernym/hyponym chains (WordNet 3.0's deepest is 19)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"WordNet folder {self.folder} does not exist or is not a folder")
        missing = [name for name in REQUIRED if not (self.folder / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{self.folder} is not a WordNet database folder (dict/): "
                                    f"missing {', '.join(missing)}")
        _allow(self.folder)
        with warnings.catch_warnings():  # "multilingual functions are not available": no OMW, as intended
            warnings.simplefilter("ignore", UserWarning)
            self._wn = _Reader(str(self.folder), None)
        self.name = f"wordnet-{self._wn.get_version()}"
        self._counts = (self.folder / "cntlist.rev").is_file()
        self._lock = threading.RLock()
        self._senses: dict[str, list[Sense]] = {}

    def __reduce__(self):
        # Ship the folder, not the reader: the receiving process builds its own.
        return (WordNet, (str(self.folder), self.max_depth))

    def senses(self, word: str) -> list[Sense]:
        """Every synset of ``word`` (lower-cased, spaces as ``_``), most frequent first (see the module doc)."""
        word = word.strip().lower().replace(" ", "_")
        with self._lock:
            if word not in self._senses:
                self._senses[word] = self._lookup(word)
            return list(self._senses[word])

    def _lookup(self, word: str) -> list[Sense]:
        blocks = []
        for pos in POS_ORDER:
            synsets = self._wn.synsets(word, pos)  # "a" includes the satellites
            # the base forms synsets() looked up (geese -> goose); NLTK's public morphy() gives only one
            forms = ({word} | set(self._wn._morphy(word, pos))) if synsets else set()
            blocks.append([(s, [lem for lem in s.lemmas() if lem.name().lower() in forms]) for s in synsets])
        ordered = _merge(blocks, self._count if self._counts else (lambda lemmas: 0))
        # a synset reached through two base forms (NLTK's synsets() lists it once per form) is one sense
        seen, unique = set(), []
        for synset, matching in ordered:
            if synset.name() not in seen:
                seen.add(synset.name())
                unique.append((synset, matching))
        return [self._sense(word, rank, synset, matching) for rank, (synset, matching) in enumerate(unique)]

    def _count(self, lemmas) -> int:
        return max((lem.count() for lem in lemmas), default=0)

    def _sense(self, word: str, rank: int, synset, matching) -> Sense:
        return Sense(
            id=synset.name(), word=word, pos="a" if synset.pos() == "s" else synset.pos(),
            definition=synset.definition(), lemmas=tuple(synset.lemma_names()), rank=rank,
            group=synset.lexname(), named_entity=bool(synset.instance_hypernyms()),
            capitalised=bool(matching) and all(lem.name() != lem.name().lower() for lem in matching),
            degree=degree(synset),
        )

    def related(self, first: Sense, second: Sense, relation: str) -> bool:
        """Whether ``second`` is a ``relation`` of ``first`` (paris, france, "part_holonym": True)."""
        if relation not in RELATIONS:
            raise ValueError(f"relation {relation!r}: expected one of {RELATIONS}")
        with self._lock:
            a, b = self._wn.synset(first.id), self._wn.synset(second.id)
            if relation == "hypernym":
                return b in self._ancestors(a)
            if relation == "hyponym":
                return a in self._ancestors(b)
            if relation in _DIRECT:
                return b in getattr(a, relation + "s")()
            if relation == "similar":
                return a != b and b in _similar(a)
            return _antonym(a, b)

    def _ancestors(self, synset) -> set:
        """Hypernyms (instance hypernyms too) up to ``max_depth`` steps away."""
        seen, frontier = set(), [synset]
        for _ in range(self.max_depth):
            frontier = [h for s in frontier for h in s.hypernyms() + s.instance_hypernyms() if h not in seen]
            if not frontier:
                break
            seen.update(frontier)
        return seen


def degree(synset) -> int:
    """The synset's semantic pointers: synset-level plus lemma-level relations (module doc)."""
    return (sum(len(getattr(synset, name)()) for name in SYNSET_RELATIONS)
            + sum(len(getattr(lemma, name)()) for lemma in synset.lemmas() for name in LEMMA_RELATIONS))


def _merge(blocks, count):
    """Merge per-POS sense lists by descending ``count`` of the matching lemmas, keeping each list's
    order (WordNet's); ties go to the earlier POS block."""
    keyed = [[(count(matching), synset, matching) for synset, matching in block] for block in blocks]
    heads, out = [0] * len(keyed), []
    while True:
        live = [i for i, block in enumerate(keyed) if heads[i] < len(block)]
        if not live:
            return out
        best = max(live, key=lambda i: (keyed[i][heads[i]][0], -i))
        _, synset, matching = keyed[best][heads[best]]
        heads[best] += 1
        out.append((synset, matching))


def _heads(synset) -> set:
    """The synset, with its head adjective when it is a satellite (``s``) of a cluster."""
    return {synset, *synset.similar_tos()} if synset.pos() == "s" else {synset}


def _similar(synset) -> set:
    """Synsets close in meaning: similar-to, also-see and verb-group pointers (synset and lemma level),
    satellites of the same head, and sisters sharing a direct (instance) hypernym."""
    near = set(synset.similar_tos() + synset.also_sees() + synset.verb_groups())
    for lemma in synset.lemmas():
        near.update(other.synset() for other in lemma.also_sees() + lemma.verb_groups() + lemma.similar_tos())
    for head in synset.similar_tos():
        near.update(head.similar_tos())
    for parent in synset.hypernyms() + synset.instance_hypernyms():
        near.update(parent.hyponyms() + parent.instance_hyponyms())
    near.discard(synset)
    return near


def _antonym(first, second) -> bool:
    """A lemma antonym of ``first`` (or of its head, if a satellite) is ``second`` or ``second``'s head:
    direct antonyms (hot/cold), WordNet's indirect ones (arid -> dry <-> wet), and satellites of two
    opposite heads (torrid -> hot <-> cold <- frigid)."""
    opposite = {other.synset() for head in _heads(first) for lemma in head.lemmas() for other in lemma.antonyms()}
    return bool(opposite & _heads(second))
