"""A BATS-3.0-format analogy folder for the demo world.

``write_bats(world, out_dir, rng)`` writes ``out_dir/BATS_3.0/`` in the layout
of the official zip: ``3_Encyclopedic_semantics/E01 [country - capital].txt``
and so on, UTF-8, one pair a line (``word<TAB>answer1/answer2/...``, lower
case, ``_`` for spaces), lines sorted by word, no newline after the last line.
Nine categories, named as BATS names them:

- E01 [country - capital]: every capital, then its country and the country's
  official name (as in BATS, the word is the capital: ``abuja	nigeria``);
- E04 [name - nationality] and E05 [name - occupation]: surnames of 15 people
  of the world with an article (a surname no one else has), then their
  demonym, and their occupation (and ``founder`` for founders);
- E07 [animal - sound], L01 [hypernyms - animals], L04 [meronyms - substance],
  L05 [meronyms - member], L06 [meronyms - part], L09 [antonyms - gradable]:
  from the English lexicon of :mod:`structcse.demo.wordnet`, every answer
  with its synonyms (the lemmas of its synset; L01: every hypernym up to
  ``organism``; L09: the antonym's satellites too).

Every word has a synset in the demo WordNet except those of :data:`ABSENT`
(and a few answers such as ``ribbit``), so DSBATS-sn's "no synset" drop is
exercised. Only ``rng`` (pass ``random.Random(f"bats-{seed}")``, or the seed
itself) picks the people.
"""

from __future__ import annotations

import random
from pathlib import Path

from structcse.demo.wordnet import ADJECTIVES, MEMBERS, NOUNS, PARTS, SOUNDS, SUBSTANCES, VERBS
from structcse.demo.world import World

ENCYCLOPEDIC = "3_Encyclopedic_semantics"
LEXICOGRAPHIC = "4_Lexicographic_semantics"
CATEGORIES = {"E01": (ENCYCLOPEDIC, "country - capital"), "E04": (ENCYCLOPEDIC, "name - nationality"),
              "E05": (ENCYCLOPEDIC, "name - occupation"), "E07": (ENCYCLOPEDIC, "animal - sound"),
              "L01": (LEXICOGRAPHIC, "hypernyms - animals"), "L04": (LEXICOGRAPHIC, "meronyms - substance"),
              "L05": (LEXICOGRAPHIC, "meronyms - member"), "L06": (LEXICOGRAPHIC, "meronyms - part"),
              "L09": (LEXICOGRAPHIC, "antonyms - gradable")}
# lines whose word the demo WordNet does not have, per category
ABSENT = {"E07": {"alpaca": ["bray"]}, "L01": {"allosaurus": ["dinosaur", "reptile", "archosaur"]},
          "L04": {"atmosphere": ["gas", "oxygen"]}, "L09": {"introvert": ["extrovert", "outgoing"]}}
EXTRA_ANSWERS = {"E07": {"frog": ["ribbit"], "donkey": ["hee-haw"]}}
PEOPLE = 15


def category_path(root: Path, code: str) -> Path:
    folder, name = CATEGORIES[code]
    return root / folder / f"{code} [{name}].txt"


def _term(text: str) -> str:
    return text.lower().replace(" ", "_")


def _lexicon_pairs() -> dict[str, dict[str, list[str]]]:
    nouns = {key: (words.split(","), hyper) for key, _, words, hyper, _ in NOUNS}
    verbs = {key: words.split(",") for key, _, words, _, _ in VERBS}
    pairs: dict[str, dict[str, list[str]]] = {code: {} for code in ("E07", "L01", "L04", "L05", "L06", "L09")}
    for animal, sounds in SOUNDS.items():
        pairs["E07"][animal] = [lemma for sound in sounds.split() for lemma in verbs[sound]]
    parents = {hyper for _, hyper in nouns.values()}
    for key, (_, hyper) in nouns.items():
        if key in parents or not _descends(nouns, key, "animal"):
            continue
        answers, node = [], hyper
        while node and node != "living_thing":
            answers += nouns[node][0]
            node = nouns[node][1]
        pairs["L01"][key] = answers
    for code, table in (("L04", SUBSTANCES), ("L05", MEMBERS), ("L06", PARTS)):
        for word, others in table.items():
            pairs[code][word] = [lemma for other in others.split() for lemma in nouns[other][0]]
    for _, first, first_sats, second, second_sats in ADJECTIVES:
        for (words, _), (other, _), satellites in ((first, second, second_sats), (second, first, first_sats)):
            answers = other.split(",") + [lemma for sat, _ in satellites for lemma in sat.split(",")]
            for word in words.split(","):
                pairs["L09"][word] = answers
    return pairs


def _descends(nouns: dict, key: str, ancestor: str) -> bool:
    while key:
        if key == ancestor:
            return True
        key = nouns[key][1]
    return False


def bats_pairs(world: World, rng: random.Random) -> dict[str, dict[str, list[str]]]:
    """``{category code: {word: [answers]}}`` in BATS spelling (lower case, ``_`` for spaces)."""
    pairs = {"E01": {_term(c.cities[0].title): [_term(c.title), _term(c.official)] for c in world.countries}}
    surnames = [p.surname.lower() for p in world.people]
    unique = [p for p in world.people if surnames.count(p.surname.lower()) == 1]
    people = rng.sample(unique, min(PEOPLE, len(unique)))
    pairs["E04"] = {_term(p.surname): [_term(p.country.demonym)] for p in people}
    pairs["E05"] = {_term(p.surname): [_term(p.occupation)] + (["founder"] if p.founded else []) for p in people}
    pairs.update(_lexicon_pairs())
    for source in (EXTRA_ANSWERS, ABSENT):
        for code, lines in source.items():
            for word, answers in lines.items():
                pairs[code][word] = pairs[code].get(word, []) + answers
    return {code: pairs[code] for code in CATEGORIES}


def write_bats(world: World, out_dir, rng_or_seed) -> Path:
    """Write ``out_dir/BATS_3.0/`` (created if missing) and return it."""
    rng = rng_or_seed if isinstance(rng_or_seed, random.Random) else random.Random(f"bats-{rng_or_seed}")
    root = Path(out_dir) / "BATS_3.0"
    for code, lines in bats_pairs(world, rng).items():
        path = category_path(root, code)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "\n".join(f"{word}\t{'/'.join(dict.fromkeys(answers))}" for word, answers in sorted(lines.items()))
        path.write_bytes(text.encode("utf-8"))
    return root
