"""The embedded demo world: a small fictional world in real dump formats.

``generate_demo_world(out_dir, seed, scale)`` writes, deterministically from
``seed`` (same seed, same bytes):

- ``wikipedia/enwiki-20260101-pages-articles-multistream.xml.bz2`` and its
  ``…-multistream-index.txt.bz2``: the English wiki (``<dbname>enwiki``), a
  MediaWiki export-0.11 dump made of one bz2 stream for the ``<siteinfo>``
  header, one per 100 ``<page>`` elements and one for ``</mediawiki>``; the
  index has one ``offset:page_id:title`` line per page;
- ``wikipedia/dewiki-20260101-pages-articles-multistream.xml.bz2`` and its
  index: a small German wiki (``<dbname>dewiki``, German namespace names,
  standard namespace numbers) in the same layout, with 20 pages per stream so
  that it has several page streams. It has short template-written German
  articles about a deterministic subset of the world (at scale 1, about 40:
  some countries with their cities, companies with their industries,
  founders and chief executives, and the people without an English article)
  plus redirects (official country names, English names of renamed cities and
  companies). Some German titles differ from the English ones (with seed 0:
  ``Milyganien`` for ``Milygania``, ``Quinvelfurt`` for ``Quinvelford``,
  ``Rümbra`` for ``Rumbra``, ``Bergbau`` for ``Mining``, ``Zokano-Gruppe``
  for ``Zokano Group``, ``Lydenez Yards (Unternehmen)``); people keep their
  names. Every sentence of a German article is at least 30 characters long
  and links to another German article, and some links go through redirects;
- ``wikidata/wikidata-20260101-all.json.bz2``: the Wikidata JSON dump of the
  same world, one entity per line inside ``[`` … ``]``; items have an
  ``enwiki`` sitelink when they have an English article and a ``dewiki``
  sitelink (and the German title, without a ``(…)`` qualifier, as ``de``
  label) when they have a German one, so titles of both wikis resolve to the
  same QID;
- ``sts/sts-dev.csv`` and ``sts/sts-test.csv``: graded sentence pairs about
  the world in the SentEval STS-Benchmark layout;
- ``nli/s1.{train,dev,test}``, ``nli/s2.*``, ``nli/labels.*``: NLI pairs about
  the world in SentEval's layout (line i of the three files is one pair).
  Each premise is a true fact; it comes with an entailment (a paraphrase or a
  generalisation of the fact), a contradiction (the fact with a wrong value:
  another year, city, founder, number, ...) and a neutral hypothesis (another
  true fact about the same subject), so every premise gives one
  (premise, entailment, contradiction) triplet. About 360 pairs at scale 1,
  split 80/10/10 by premise. They are drawn with their own generator
  (``random.Random(f"nli-{seed}")``) after everything else, so no other file
  depends on them, and ``world.json`` does not list them;
- ``bats/BATS_3.0/``: word analogies about the world and a small English
  lexicon in the BATS 3.0 layout (``3_Encyclopedic_semantics/E01 [country -
  capital].txt``, ..., ``4_Lexicographic_semantics/L09 [antonyms -
  gradable].txt``; nine categories, about 150 pairs), see
  :mod:`structcse.demo.bats`;
- ``wordnet/dict/``: a WordNet-3.0-format database (``data.*``, ``index.*``,
  ``*.exc``, ``lexnames``, ``index.sense``) with a synset for every BATS word
  but a few deliberately absent ones: the lexicon's relations, the world's
  named entities as instance synsets, and distractor senses DSBATS-sn's
  filters must drop, see :mod:`structcse.demo.wordnet`. Both are drawn with
  their own generators (``random.Random(f"bats-{seed}")``,
  ``random.Random(f"wordnet-{seed}")``), so no other file depends on them;
- ``world.json``: paths, seed, counts and the ground truth (entities,
  redirects, the pages with deliberate defects, ``dewiki_titles`` as
  ``{qid: German title}`` and ``dewiki_redirects`` as ``{source: target}``).

The world has countries, cities, industries, companies and people. Articles
are real wikitext (infoboxes with nested templates, refs, tables, files,
comments, categories, link trails, links through redirects) and the Wikidata
items carry the matching claims (P31, P17, P452, P112, P169, P27, …), with a
few edge cases ingest must handle: redirects, non-article namespaces, broken
markup, a near-empty stub, ``novalue``/``somevalue`` snaks, a deprecated P31,
items without an enwiki sitelink (people with only a German article) and
property entities.

The German wiki is drawn with its own random generator (seeded from
``seed``): the English dump, the STS pairs and the Wikidata statements do not
depend on it, only the items' ``dewiki`` sitelinks and ``de`` labels do.

The package, by what it makes:

- :mod:`structcse.demo.vocab`: the fictional vocabulary (industries, name
  parts, places, occupations);
- :mod:`structcse.demo.world`: the world model and how it is drawn;
- :mod:`structcse.demo.facts`: facts about entities and the sentence
  templates that state them;
- :mod:`structcse.demo.articles`: the English wiki's pages;
- :mod:`structcse.demo.dewiki`: the German wiki's pages;
- :mod:`structcse.demo.multistream` and :mod:`structcse.demo.wikidata`: the
  dump writers;
- :mod:`structcse.demo.pairs`: the STS and NLI pair corpora;
- :mod:`structcse.demo.bats` and :mod:`structcse.demo.wordnet`: the BATS
  analogy folder and the WordNet dictionary DSBATS-sn reads;
- this module: the public API (``DemoWorld``, ``generate_demo_world``,
  ``load_demo_world``, the paths inside a world); ``python -m structcse.demo
  --out DIR --seed N [--scale K]`` writes a world from the command line.

Only the standard library is imported: the package loads quickly and never
starts Ray.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from structcse.demo.articles import article_pages
from structcse.demo.bats import write_bats
from structcse.demo.dewiki import dewiki_pages, make_dewiki
from structcse.demo.multistream import DEWIKI, ENWIKI, write_multistream
from structcse.demo.pairs import write_nli, write_sts
from structcse.demo.wikidata import HUMAN, KIND_TYPE, wikidata_entities, write_wikidata
from structcse.demo.wordnet import write_wordnet
from structcse.demo.world import DUMP_DATE, City, Company, Entity, Person, build_world

WIKIPEDIA_DUMP = f"wikipedia/enwiki-{DUMP_DATE}-pages-articles-multistream.xml.bz2"
WIKIPEDIA_INDEX = f"wikipedia/enwiki-{DUMP_DATE}-pages-articles-multistream-index.txt.bz2"
DEWIKI_DUMP = f"wikipedia/dewiki-{DUMP_DATE}-pages-articles-multistream.xml.bz2"
DEWIKI_INDEX = f"wikipedia/dewiki-{DUMP_DATE}-pages-articles-multistream-index.txt.bz2"
WIKIDATA_DUMP = f"wikidata/wikidata-{DUMP_DATE}-all.json.bz2"
STS_DIR = "sts"
NLI_DIR = "nli"
BATS_DIR = "bats/BATS_3.0"
WORDNET_DIR = "wordnet/dict"
WORLD_FILE = "world.json"
# Ingest of this world keeps entities linked more than twice: at scale 1 it has a
# few hundred articles, so EASE's "more than ten links" (the ingest default) would
# keep only the most linked countries and industries.
ENTITY_LINK_THRESHOLD = 2

__all__ = ["BATS_DIR", "DUMP_DATE", "DEWIKI_DUMP", "DEWIKI_INDEX", "NLI_DIR", "STS_DIR", "WIKIDATA_DUMP", "WIKIPEDIA_DUMP",
           "WIKIPEDIA_INDEX", "WORDNET_DIR", "WORLD_FILE", "DemoWorld", "generate_demo_world", "load_demo_world"]


@dataclass(frozen=True)
class DemoWorld:
    """Where a generated demo world lies on disk."""

    root: Path
    wikipedia_dump: Path  # the English wiki (enwiki)
    wikipedia_index: Path
    wikidata_dump: Path
    sts_dir: Path
    num_pages: int  # pages of the English wiki
    dewiki_dump: Path
    dewiki_index: Path
    dewiki_num_pages: int
    nli_dir: Path | None = None  # SentEval-layout NLI pairs (s1/s2/labels.{train,dev,test}); None in older worlds
    bats_dir: Path | None = None  # BATS_3.0/ analogy folder; None in older worlds
    wordnet_dir: Path | None = None  # WordNet-format dict/ folder; None in older worlds

    def ground_truth(self) -> dict:
        """The parsed ``world.json``: seed, counts, entities, redirects, special pages, ``dewiki_titles``
        (``{qid: German title}``) and ``dewiki_redirects`` (``{source: target}``)."""
        return json.loads((self.root / WORLD_FILE).read_text(encoding="utf-8"))


def _paths() -> dict[str, str]:
    return {"wikipedia_dump": WIKIPEDIA_DUMP, "wikipedia_index": WIKIPEDIA_INDEX, "wikidata_dump": WIKIDATA_DUMP,
            "dewiki_dump": DEWIKI_DUMP, "dewiki_index": DEWIKI_INDEX, "sts_dir": STS_DIR,
            "bats_dir": BATS_DIR, "wordnet_dir": WORDNET_DIR}


def _entity_record(entity: Entity) -> dict:
    record = {"title": entity.title, "qid": entity.qid, "type": KIND_TYPE[entity.kind], "kind": entity.kind}
    if isinstance(entity, (Company, City)):
        record["country"] = entity.country.qid
    if isinstance(entity, Company):
        record["industry"] = entity.industry.qid
    if isinstance(entity, Person):
        record["citizenship"] = entity.country.qid
    return record


def generate_demo_world(out_dir, seed: int = 0, scale: int = 1) -> DemoWorld:
    """Write the demo world under ``out_dir`` (created if missing) and describe it."""
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    root = Path(out_dir)
    for sub in ("wikipedia", "wikidata", STS_DIR):
        (root / sub).mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    world = build_world(rng, scale)
    pages, specials = article_pages(rng, world)
    write_multistream(rng, pages, root / WIKIPEDIA_DUMP, root / WIKIPEDIA_INDEX, ENWIKI)
    # The German wiki has its own generator, so the English dump, STS pairs and statements do not depend on it.
    de_rng = random.Random(f"dewiki-{seed}")
    de = make_dewiki(de_rng, world, scale)
    de_pages = dewiki_pages(de_rng, de)
    write_multistream(de_rng, de_pages, root / DEWIKI_DUMP, root / DEWIKI_INDEX, DEWIKI)
    entities = wikidata_entities(rng, world, de)
    write_wikidata(entities, root / WIKIDATA_DUMP)
    sts_counts = write_sts(rng, world, root / STS_DIR, 150 * scale)
    # BATS and WordNet from their own generators: they draw nothing from rng
    bats = write_bats(world, (root / BATS_DIR).parent, random.Random(f"bats-{seed}"))
    wordnet = write_wordnet(world, (root / WORDNET_DIR).parent, random.Random(f"wordnet-{seed}"))
    redirects = sum(1 for p in pages if p.redirect)
    non_articles = sum(1 for p in pages if p.ns != 0)
    articles = world.articles()
    summary = {
        "name": "demowiki", "dump_date": DUMP_DATE, "seed": seed, "scale": scale, "paths": _paths(),
        "counts": {"pages": len(pages), "articles": len(pages) - redirects - non_articles, "redirects": redirects,
                   "non_article_pages": non_articles, "entities": len(entities), "article_entities": len(articles),
                   "sts_dev": sts_counts["dev"], "sts_test": sts_counts["test"],
                   "dewiki_pages": len(de_pages), "dewiki_articles": len(de.entities),
                   "dewiki_redirects": len(de.redirects),
                   "bats_pairs": sum(len(p.read_text(encoding="utf-8").split("\n")) for p in bats.rglob("*.txt")),
                   "wordnet_synsets": sum(1 for p in wordnet.glob("data.*") for line in
                                          p.read_text(encoding="utf-8").splitlines() if not line.startswith("  "))},
        "entities": [_entity_record(e) for e in sorted(articles, key=lambda e: int(e.qid[1:]))],
        "entities_without_article": [{"label": g.title, "qid": g.qid, "type": HUMAN} for g in world.ghosts],
        "redirects": dict(sorted(world.redirects.items())),
        "special_pages": specials,
        "dewiki_titles": {e.qid: de.title(e) for e in sorted(de.entities, key=lambda e: int(e.qid[1:]))},
        "dewiki_redirects": dict(sorted(de.redirects.items())),
    }
    (root / WORLD_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    # NLI pairs last, from their own generator: no byte written above depends on them
    write_nli(random.Random(f"nli-{seed}"), world, root / NLI_DIR, 120 * scale)
    return load_demo_world(root)


def load_demo_world(out_dir) -> DemoWorld:
    """Describe a demo world written earlier by ``generate_demo_world``."""
    root = Path(out_dir)
    summary = json.loads((root / WORLD_FILE).read_text(encoding="utf-8"))
    paths = summary["paths"]
    return DemoWorld(root=root, wikipedia_dump=root / paths["wikipedia_dump"],
                     wikipedia_index=root / paths["wikipedia_index"], wikidata_dump=root / paths["wikidata_dump"],
                     sts_dir=root / paths["sts_dir"], num_pages=summary["counts"]["pages"],
                     dewiki_dump=root / paths["dewiki_dump"], dewiki_index=root / paths["dewiki_index"],
                     dewiki_num_pages=summary["counts"]["dewiki_pages"],
                     nli_dir=root / NLI_DIR if (root / NLI_DIR).is_dir() else None,
                     bats_dir=root / paths["bats_dir"] if "bats_dir" in paths else None,
                     wordnet_dir=root / paths["wordnet_dir"] if "wordnet_dir" in paths else None)
