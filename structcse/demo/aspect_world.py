"""A world of businesses for AspectCSE's benchmark, written as real dumps: one an aspect model must earn its score on.

``generate_aspect_world(out_dir, seed, companies)`` writes, deterministically from ``seed``:

- ``wikipedia/enwiki-20260101-pages-articles-multistream.xml.bz2`` (+ index): one article per company, city,
  country and industry (all but the companies are unlabelled pages: AspectCSE's random negatives);
- ``wikidata/wikidata-20260101-all.json.bz2``: the companies (``P31`` business, ``P17`` country, ``P452``
  industry), their countries and industries, each with its ``enwiki`` sitelink, and the type items;
- ``aspect_world.json``: seed, counts and each company's labels.

What makes it a test and not a lookup (the demo world's intros name their country and industry outright):

- **no label is written**: a company's text names the *city* it is based in, never the country (a country's
  cities are learnt from the training entities), and says what it does in words that never contain its
  industry's label ("runs wind farms along the coast", not "renewable energy");
- **several labels**: about a fifth of the companies have a second country (a plant in a city of another
  country) and a quarter a second industry;
- **distractors**: every text has one or two sentences that say nothing about either aspect, and some name a
  city of another country (where the founder studied) or another industry's work (a supplier's);
- **size**: at ``companies=1200`` and AspectCSE's ``test_share`` 0.45, about 540 held-out entities, each
  country about 45 and each industry about 55 of them, so every aspect has at least 10 relevant documents
  per seed and the best possible P@10 is 1.0 (``score.aspects.retrieval_ceiling`` computes it exactly).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from structcse.demo.multistream import Page, write_multistream
from structcse.demo.vocab import CITY_ENDINGS, COUNTRY_ENDINGS
from structcse.demo.wikidata import BUSINESS, COUNTRY, INDUSTRY, TYPE_ITEMS, _Claims, _item, write_wikidata
from structcse.demo.world import DUMP_DATE, _Names

# label -> (what a company of it does: phrases without the label's words)
INDUSTRY_WORK = {
    "Software": ("writes the programs that run payroll and stock control", "builds the code behind online shops",
                 "sells licences for tools that programmers use every day", "maintains accounting programs for tax advisers"),
    "Semiconductor": ("etches microchips onto silicon wafers", "designs processors for phones and laptops",
                      "makes memory chips for data centres", "packages sensor chips for car makers"),
    "Mining": ("digs copper and zinc out of open pits", "runs underground coal shafts in the hills",
               "extracts iron ore and ships it by rail", "quarries limestone and gravel"),
    "Shipbuilding": ("builds cargo vessels and ferries in its dry docks", "welds the hulls of tankers",
                     "repairs and refits ocean liners", "launches patrol boats for coast guards"),
    "Banking": ("takes deposits and lends money to households", "finances farms and small workshops with loans",
                "runs savings accounts and a network of cash machines", "issues mortgages and credit cards"),
    "Pharmaceutical": ("develops medicines for heart disease", "produces vaccines and antibiotics",
                       "runs clinical trials of new drugs", "makes generic tablets for pharmacies"),
    "Renewable energy": ("runs wind farms along the coast", "installs solar panels on rooftops",
                         "operates small hydroelectric dams", "sells electricity from biogas plants"),
    "Food processing": ("cans fish and vegetables", "mills flour and bakes bread for supermarkets",
                        "turns milk into cheese and yoghurt", "packs frozen meals for caterers"),
    "Automotive": ("assembles cars and delivery vans", "makes gearboxes and brakes for car makers",
                   "builds electric buses for city fleets", "produces tyres and exhaust systems"),
    "Telecommunications": ("runs a mobile phone network", "lays fibre cables to homes and offices",
                           "sells broadband and landline contracts", "operates radio masts and satellite links"),
    "Airline": ("flies passengers between regional airports", "operates a fleet of jets on holiday routes",
                "carries air freight overnight", "sells cheap seats on short flights"),
    "Retail": ("runs a chain of department stores", "sells groceries through neighbourhood shops",
               "operates discount outlets in shopping centres", "sells clothes and shoes through its own stores"),
}
COMPANY_SUFFIXES = ("Holdings", "Group", "Company", "Corporation", "Partners", "Works", "Enterprises", "Ltd")
BASED = ("{name} is based in {city}.", "{name} has its head office in {city}.",
         "{name} was founded in {year} in {city}, where it still has its head office.",
         "The company's headquarters are in {city}.")
SECOND_COUNTRY = ("It also has a large plant in {city}.", "Since {year} it has run a second site in {city}.")
WORK = ("{name} {work}.", "The company {work}.", "Most of its revenue comes from the way it {work}.")
SECOND_WORK = ("In {year} it began a second line of business: it {work}.", "It also {work}.")
DISTRACTORS = ("The company's logo, a green circle, was redesigned in {year}.", "It sponsors a youth rowing club.",
               "Its annual report is published each spring.", "It has been listed on the stock exchange since {year}.",
               "About {staff} people work for it.", "A documentary about the company was broadcast in {year}.",
               "Its chairman has held the post since {year}.", "The firm won an award for its apprenticeships in {year}.")
MISLEADING_CITY = ("Its founder studied in {city} before starting the business.",
                   "In {year} it lost a tender in {city}.")
MISLEADING_WORK = "Its canteen is run by a supplier that also {work}."


@dataclass
class AspectCompany:
    title: str
    qid: str
    cities: list  # (city, country): the first is the head office
    industries: list
    text: str


def _cities(rng: random.Random, names: _Names, countries: int, per_country: int) -> dict[str, list[str]]:
    world: dict[str, list[str]] = {}
    for _ in range(countries):
        ending = rng.choice(COUNTRY_ENDINGS)[0]
        country = names.unique(lambda ending=ending: names.stem() + ending)
        world[country] = [names.unique(lambda: names.stem() + rng.choice(CITY_ENDINGS)) for _ in range(per_country)]
    return world


def _company_text(rng: random.Random, name: str, cities: list, industries: list, world: dict) -> str:
    year = rng.randint(1950, 2020)
    sentences = [rng.choice(BASED).format(name=name, city=cities[0][0], year=year),
                 rng.choice(WORK).format(name=name, work=rng.choice(INDUSTRY_WORK[industries[0]]))]
    if len(cities) > 1:
        sentences.append(rng.choice(SECOND_COUNTRY).format(city=cities[1][0], year=rng.randint(year, 2024)))
    if len(industries) > 1:
        sentences.append(rng.choice(SECOND_WORK).format(work=rng.choice(INDUSTRY_WORK[industries[1]]),
                                                        year=rng.randint(year, 2024)))
    distractors = [d.format(year=rng.randint(year, 2025), staff=f"{rng.randint(2, 900) * 10:,}")
                   for d in rng.sample(DISTRACTORS, rng.randint(1, 2))]
    own = {country for _, country in cities}
    if rng.random() < 0.3:
        other = rng.choice([c for c in world if c not in own])
        distractors.append(rng.choice(MISLEADING_CITY).format(city=rng.choice(world[other]), year=rng.randint(year, 2025)))
    if rng.random() < 0.2:
        other = rng.choice([i for i in INDUSTRY_WORK if i not in industries])
        distractors.append(MISLEADING_WORK.format(work=rng.choice(INDUSTRY_WORK[other])))
    body = sentences[:2] + sorted(sentences[2:] + distractors, key=lambda _: rng.random())
    return " ".join(body)


def build_aspect_world(seed: int = 0, companies: int = 1200, countries: int = 12,
                       cities_per_country: int = 4) -> tuple[dict, list[AspectCompany], dict]:
    """(country -> its cities, the companies, label -> QID for every country and industry)."""
    rng = random.Random(f"aspect-world-{seed}")
    names = _Names(rng)
    for label in INDUSTRY_WORK:
        names.claim(label)
    world = _cities(rng, names, countries, cities_per_country)
    qids = iter(range(5000, 10**6, 3))
    label_qid = {label: f"Q{next(qids)}" for label in [*world, *INDUSTRY_WORK]}
    out = []
    for _ in range(companies):
        name = names.unique(lambda: f"{names.stem()} {rng.choice(COMPANY_SUFFIXES)}")
        home = rng.choice(list(world))
        cities = [(rng.choice(world[home]), home)]
        if rng.random() < 0.2:
            abroad = rng.choice([c for c in world if c != home])
            cities.append((rng.choice(world[abroad]), abroad))
        industries = rng.sample(list(INDUSTRY_WORK), 2 if rng.random() < 0.25 else 1)
        out.append(AspectCompany(name, f"Q{next(qids)}", cities, industries,
                                 _company_text(rng, name, cities, industries, world)))
    return world, out, label_qid


def _city_page(rng: random.Random, city: str) -> str:
    return (f"'''{city}''' is a town on the river {rng.choice(('Ailen', 'Brask', 'Coro', 'Dunmere'))}. "
            f"It has a market square, a railway station and a museum of local history. "
            f"About {rng.randint(20, 400) * 1000:,} people live there.\n\n== History ==\nThe town was first "
            f"mentioned in {rng.randint(900, 1700)}.\n")


def _label_page(rng: random.Random, label: str, industry: bool) -> str:
    what = "a branch of the economy" if industry else f"a country of about {rng.randint(2, 60)} million people"
    return f"'''{label}''' is {what}. It has its own statistics office.\n\n== Overview ==\nFigures are yearly.\n"


def generate_aspect_world(out_dir, seed: int = 0, companies: int = 1200) -> dict:
    """Write the dumps and ``aspect_world.json`` into ``out_dir``; returns what the json holds (with paths)."""
    out = Path(out_dir)
    (out / "wikipedia").mkdir(parents=True, exist_ok=True)
    (out / "wikidata").mkdir(parents=True, exist_ok=True)
    world, firms, label_qid = build_aspect_world(seed, companies)
    rng = random.Random(f"aspect-dumps-{seed}")
    pages = [Page(c.title, 0, c.text + "\n\n== History ==\nThe company was registered as a limited company.\n", None)
             for c in firms]
    pages += [Page(city, 0, _city_page(rng, city), None) for cities in world.values() for city in cities]
    pages += [Page(label, 0, _label_page(rng, label, label in INDUSTRY_WORK), None) for label in label_qid]
    rng.shuffle(pages)
    dump = out / "wikipedia" / f"enwiki-{DUMP_DATE}-pages-articles-multistream.xml.bz2"
    index = out / "wikipedia" / f"enwiki-{DUMP_DATE}-pages-articles-multistream-index.txt.bz2"
    write_multistream(rng, pages, dump, index)

    revision = 2_400_000_000
    entities = [_item(qid, {"en": label}, {"en": description}, [], {}, {}, revision)
                for qid, (label, description, _) in sorted(TYPE_ITEMS.items(), key=lambda kv: int(kv[0][1:]))]
    for label, qid in label_qid.items():
        kind = INDUSTRY if label in INDUSTRY_WORK else COUNTRY
        claims = _Claims(rng, qid)
        claims.item("P31", kind)
        entities.append(_item(qid, {"en": label}, {}, [], claims.claims,
                              {"enwiki": {"site": "enwiki", "title": label, "badges": []}}, revision))
    for c in firms:
        claims = _Claims(rng, c.qid)
        claims.item("P31", BUSINESS)
        for country in dict.fromkeys(country for _, country in c.cities):
            claims.item("P17", label_qid[country])
        for industry in c.industries:
            claims.item("P452", label_qid[industry])
        entities.append(_item(c.qid, {"en": c.title}, {}, [], claims.claims,
                               {"enwiki": {"site": "enwiki", "title": c.title, "badges": []}}, revision))
    wikidata = out / "wikidata" / f"wikidata-{DUMP_DATE}-all.json.bz2"
    write_wikidata(entities, wikidata)
    facts = {"seed": seed, "companies": len(firms), "countries": {k: v for k, v in world.items()},
             "industries": list(INDUSTRY_WORK), "wikipedia_dump": str(dump), "wikipedia_index": str(index),
             "wikidata_dump": str(wikidata),
             "labels": {c.qid: {"P17": sorted({country for _, country in c.cities}), "P452": sorted(c.industries)}
                        for c in firms}}
    (out / "aspect_world.json").write_text(json.dumps(facts, indent=1, sort_keys=True))
    return facts
