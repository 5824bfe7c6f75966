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
"""

from __future__ import annotations

import argparse
import bz2
import hashlib
import json
import random
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple
from xml.sax.saxutils import escape

DUMP_DATE = "20260101"
TIMESTAMP = "2026-01-01T00:00:00Z"
PAGES_PER_STREAM = 100
DEWIKI_PAGES_PER_STREAM = 20
WIKIPEDIA_DUMP = f"wikipedia/enwiki-{DUMP_DATE}-pages-articles-multistream.xml.bz2"
WIKIPEDIA_INDEX = f"wikipedia/enwiki-{DUMP_DATE}-pages-articles-multistream-index.txt.bz2"
DEWIKI_DUMP = f"wikipedia/dewiki-{DUMP_DATE}-pages-articles-multistream.xml.bz2"
DEWIKI_INDEX = f"wikipedia/dewiki-{DUMP_DATE}-pages-articles-multistream-index.txt.bz2"
WIKIDATA_DUMP = f"wikidata/wikidata-{DUMP_DATE}-all.json.bz2"
STS_DIR = "sts"
NLI_DIR = "nli"
WORLD_FILE = "world.json"

HUMAN, CITY, COUNTRY, INDUSTRY, BUSINESS = "Q5", "Q515", "Q6256", "Q268592", "Q4830453"
TYPE_ITEMS = {
    HUMAN: ("human", "any member of Homo sapiens", "Mensch"),
    CITY: ("city", "large human settlement", "Stadt"),
    COUNTRY: ("country", "distinct territorial body or political entity", "Staat"),
    INDUSTRY: ("industry", "group of businesses that share a common method of generating profits", "Branche"),
    BUSINESS: ("business", "organization undertaking commercial, industrial or professional activity", "Unternehmen"),
}
KIND_TYPE = {"person": HUMAN, "city": CITY, "country": COUNTRY, "industry": INDUSTRY, "company": BUSINESS}
PROPERTIES = {
    "P17": ("country", "wikibase-item"),
    "P19": ("place of birth", "wikibase-item"),
    "P27": ("country of citizenship", "wikibase-item"),
    "P31": ("instance of", "wikibase-item"),
    "P36": ("capital", "wikibase-item"),
    "P47": ("shares border with", "wikibase-item"),
    "P112": ("founded by", "wikibase-item"),
    "P159": ("headquarters location", "wikibase-item"),
    "P169": ("chief executive officer", "wikibase-item"),
    "P452": ("industry", "wikibase-item"),
    "P569": ("date of birth", "time"),
    "P570": ("date of death", "time"),
    "P571": ("inception", "time"),
    "P585": ("point in time", "time"),
    "P1082": ("population", "quantity"),
    "P1128": ("employees", "quantity"),
}


class IndustrySpec(NamedTuple):
    title: str
    de: str
    sector: str
    kind: str
    kind_wiki: str
    market: str
    suffixes: tuple[str, ...]
    products: tuple[str, ...]


INDUSTRIES = (
    IndustrySpec("Software", "Softwareindustrie", "software", "software company", "[[software]] company",
                 "enterprise software market", ("Systems", "Software", "Labs"),
                 ("database software", "accounting software", "developer tools", "security software")),
    IndustrySpec("Cloud computing", "Cloud Computing", "cloud computing", "cloud computing company",
                 "[[cloud computing]] company", "cloud services market", ("Cloud", "Data", "Networks"),
                 ("hosting services", "storage platforms", "data centres", "backup services")),
    IndustrySpec("Semiconductor", "Halbleiterindustrie", "semiconductors", "maker of semiconductors",
                 "maker of [[semiconductor]]s", "chip market", ("Micro", "Semiconductors", "Devices"),
                 ("memory chips", "microcontrollers", "power transistors", "image sensors")),
    IndustrySpec("Banking", "Bankwesen", "banking", "bank", "[[Banking|bank]]", "retail banking market",
                 ("Bank", "Capital", "Finance"), ("savings accounts", "mortgages", "corporate loans", "payment cards")),
    IndustrySpec("Insurance", "Versicherungswirtschaft", "insurance", "insurance company", "[[insurance]] company",
                 "insurance market", ("Insurance", "Assurance", "Mutual"),
                 ("life insurance", "property insurance", "reinsurance", "health insurance")),
    IndustrySpec("Mining", "Bergbau", "mining", "mining company", "[[mining]] company", "metals market",
                 ("Mining", "Minerals", "Resources"), ("copper", "iron ore", "lithium", "nickel")),
    IndustrySpec("Shipbuilding", "Schiffbau", "shipbuilding", "shipbuilder", "[[shipbuilding|shipbuilder]]",
                 "shipbuilding market", ("Shipyards", "Marine", "Yards"),
                 ("container ships", "ferries", "naval vessels", "tugboats")),
    IndustrySpec("Pharmaceutical industry", "Pharmaindustrie", "pharmaceuticals", "pharmaceutical company",
                 "[[Pharmaceutical industry|pharmaceutical company]]", "market for prescription drugs",
                 ("Pharma", "Therapeutics", "Biologics"),
                 ("vaccines", "antibiotics", "generic drugs", "cancer treatments")),
    IndustrySpec("Telecommunications", "Telekommunikation", "telecommunications", "telecommunications company",
                 "[[telecommunications]] company", "mobile phone market", ("Telecom", "Mobile", "Communications"),
                 ("mobile networks", "broadband internet", "fibre optic lines", "satellite links")),
    IndustrySpec("Automotive industry", "Automobilindustrie", "car making", "car manufacturer",
                 "[[Automotive industry|car manufacturer]]", "car market", ("Motors", "Automotive", "Cars"),
                 ("electric cars", "trucks", "buses", "sports cars")),
    IndustrySpec("Retail", "Einzelhandel", "retail", "retailer", "[[retail]]er", "grocery market",
                 ("Retail", "Stores", "Markets"),
                 ("supermarkets", "department stores", "online shops", "convenience stores")),
    IndustrySpec("Renewable energy", "Erneuerbare Energie", "renewable energy", "renewable energy company",
                 "[[renewable energy]] company", "electricity market", ("Energy", "Power", "Solar"),
                 ("wind turbines", "solar parks", "hydroelectric plants", "battery storage")),
    IndustrySpec("Airline", "Fluggesellschaft", "aviation", "airline", "[[airline]]", "air travel market",
                 ("Air", "Airways", "Aviation"),
                 ("domestic flights", "cargo flights", "charter flights", "international routes")),
    IndustrySpec("Steel", "Stahlindustrie", "steel", "steel producer", "[[steel]] producer", "steel market",
                 ("Steel", "Metals", "Works"), ("steel plates", "rails", "pipes", "wire")),
    IndustrySpec("Brewing", "Brauwesen", "brewing", "brewery", "[[Brewing|brewery]]", "beer market",
                 ("Brewery", "Breweries", "Beverages"), ("lager", "wheat beer", "cider", "soft drinks")),
    IndustrySpec("Publishing", "Verlagswesen", "publishing", "publisher", "[[publishing|publisher]]",
                 "book market", ("Press", "Publishing", "Books"), ("novels", "textbooks", "newspapers", "magazines")),
    IndustrySpec("Rail transport", "Schienenverkehr", "rail transport", "railway company",
                 "[[Rail transport|railway]] company", "rail freight market", ("Rail", "Railways", "Transit"),
                 ("passenger trains", "freight trains", "sleeper services", "commuter lines")),
    IndustrySpec("Chemical industry", "Chemieindustrie", "chemicals", "chemical company",
                 "[[Chemical industry|chemical]] company", "specialty chemicals market",
                 ("Chemicals", "Chemie", "Polymers"), ("plastics", "fertilisers", "paints", "industrial gases")),
    IndustrySpec("Logistics", "Logistik", "logistics", "logistics company", "[[logistics]] company",
                 "freight market", ("Logistics", "Freight", "Cargo"),
                 ("warehousing", "parcel delivery", "freight forwarding", "cold storage")),
    IndustrySpec("Video game industry", "Computerspielindustrie", "video games", "video game developer",
                 "[[Video game industry|video game]] developer", "video game market",
                 ("Games", "Interactive", "Studios"),
                 ("strategy games", "mobile games", "racing games", "puzzle games")),
    IndustrySpec("Construction", "Bauwirtschaft", "construction", "construction company",
                 "[[construction]] company", "construction market", ("Construction", "Builders", "Engineering"),
                 ("bridges", "office towers", "motorways", "tunnels")),
    IndustrySpec("Textile industry", "Textilindustrie", "textiles", "textile manufacturer",
                 "[[Textile industry|textile]] manufacturer", "clothing market", ("Textiles", "Mills", "Fabrics"),
                 ("cotton fabrics", "wool yarn", "workwear", "carpets")),
    IndustrySpec("Agriculture", "Landwirtschaft", "agriculture", "agricultural company",
                 "[[agriculture|agricultural]] company", "grain market", ("Farms", "Agro", "Harvest"),
                 ("wheat", "dairy products", "sugar beet", "animal feed")),
    IndustrySpec("Tourism", "Tourismus", "tourism", "tourism company", "[[tourism]] company", "holiday market",
                 ("Travel", "Tours", "Resorts"), ("package holidays", "hotels", "cruises", "ski resorts")),
)

SYLLABLES = ("vel", "tra", "no", "os", "ka", "ren", "dor", "mi", "sa", "lan", "tor", "vik", "bel", "ga", "ris",
             "hal", "den", "mar", "zo", "quin", "fen", "ar", "lu", "ce", "pra", "ston", "dal", "ber", "ne", "ta",
             "ly", "sol", "var", "el", "ko", "rum", "te", "si", "bra", "mon")
COUNTRY_ENDINGS = (("ia", "n", "ien"), ("ania", "n", "anien"), ("a", "n", "a"), ("and", "ic", "and"),
                   ("ora", "n", "ora"))
OFFICIAL_FORMS = ("Republic of {}", "Kingdom of {}", "Federal Republic of {}", "Grand Duchy of {}",
                  "United Provinces of {}")
REGIONS = ("the Northern Reach", "the Amber Coast", "the Sarn Basin", "the Eastern Marches",
           "the Halcyon Archipelago")
CURRENCIES = ("florin", "krona", "mark", "thaler", "dinar", "crown")
CITY_ENDINGS = ("", "", "burg", "hold", "port", "vik", "stad", "ford", "heim")
CITY_ADJECTIVES = ("port", "industrial", "historic", "cathedral", "market")
FEMALE_NAMES = ("Mira", "Lysa", "Renée", "Ilse", "Nadia", "Tamsin", "Oriane", "Katya", "Elin", "Sabine", "Yara",
                "Greta", "Ines", "Livia", "Marit", "Zofia", "Anouk", "Helka")
MALE_NAMES = ("Anton", "Tobiah", "Søren", "Kasimir", "Emil", "Bram", "Teodor", "Lucan", "Jorin", "Matthis",
              "Oskar", "Ivo", "Dario", "Feliks", "Ruben", "Aleksi", "Nils", "Corvin")
SURNAME_ENDINGS = ("bach", "feld", "mann", "sen", "ova", "ić", "ström", "ley", "ard", "ini", "berg", "ez")
OCCUPATIONS = ("entrepreneur", "engineer", "business executive", "economist", "investor", "chemist")
SUBJECTS = ("economics", "engineering", "chemistry", "law", "business administration", "physics",
            "computer science")
COMPANY_GROUP_WORDS = ("Group", "Holdings", "Industries", "International")
EDITORS = (("Halvard Quill", 48213), ("Ostrabot", 7731), ("Mereth Lane", 120944), ("Corvid", 99012),
           ("Tessaly", 3321))
EDIT_COMMENTS = ("Copyedit", "Added infobox", "Fixed typo in lead", "Update employee count -> 2025 figure",
                 "Added references & categories", "Expanded [[WP:LEAD|lead]]", "Reverted vandalism")

# Sentence templates, one list per kind of fact. "{s}" is the entity the fact
# is about; the other slots are filled from the fact. Articles and STS pairs
# use the same templates, so the pairs share the articles' vocabulary.
TEMPLATES = {
    "company_kind": ("{s} is a {kind} headquartered in {city}, {country}.",
                     "{s} is a {demonym} {kind} based in {city}.",
                     "{s} is a {kind} from {country} with its head office in {city}.",
                     "Based in {city}, {s} is a {kind} from {country}."),
    "founded": ("{s} was founded in {year} by {founders}.",
                "{founders} founded {s} in {year}.",
                "In {year}, {founders} established {s}.",
                "{s} was established by {founders} in {year}."),
    "products": ("{s} makes {p1} and {p2}.",
                 "The main products of {s} are {p1} and {p2}.",
                 "{s} is best known for its {p1} and {p2}.",
                 "{s} produces {p1} as well as {p2}."),
    "ceo": ("{ceo} has been the chief executive officer of {s} since {year}.",
            "Since {year}, {s} has been led by {ceo}, its chief executive.",
            "{ceo} became CEO of {s} in {year}.",
            "{s} appointed {ceo} as chief executive in {year}."),
    "rivals": ("{s} competes with {rivals} in the {market}.",
               "In the {market}, the main rivals of {s} are {rivals}.",
               "{s} faces competition from {rivals} in the {market}."),
    "employees": ("{s} employs about {employees} people.",
                  "{s} has a workforce of roughly {employees} employees.",
                  "About {employees} people work for {s}."),
    "acquired": ("In {year}, {s} acquired {target}.",
                 "{s} bought {target} in {year}.",
                 "{target} was taken over by {s} in {year}."),
    "person_kind": ("{s} is a {demonym} {occupation}.",
                    "{s} is a {occupation} from {country}.",
                    "{s} is a {occupation} and a citizen of {country}."),
    "born": ("{s} was born in {city}, {country}, in {year}.",
             "{s} was born in {year} in the {demonym} city of {city}.",
             "Born in {city} in {year}, {s} grew up in {country}."),
    "studied": ("{s} studied {subject} at the {university}.",
                "{s} graduated in {subject} from the {university}.",
                "{s} earned a degree in {subject} at the {university}."),
    "founder_of": ("{s} founded {company} in {year}.",
                   "In {year}, {s} started the company {company}.",
                   "{s} is the founder of {company}, which was established in {year}."),
    "ceo_of": ("{s} has been the chief executive of {company} since {year}.",
               "{s} became CEO of {company} in {year}.",
               "Since {year}, {s} has led {company} as chief executive officer."),
    "country_kind": ("{s}, officially the {official}, is a country in {region}.",
                     "The {official}, commonly known as {s}, is a state in {region}.",
                     "{s} is a country in {region} whose official name is the {official}."),
    "capital": ("The capital of {s} is {capital}.",
                "{capital} is the capital and largest city of {s}.",
                "{s} has its seat of government in {capital}."),
    "population": ("{s} has a population of about {population}.",
                   "About {population} people live in {s}.",
                   "The population of {s} is roughly {population}."),
    "borders": ("{s} borders {neighbours}.",
                "{s} shares a border with {neighbours}.",
                "{s} has land borders with {neighbours}."),
    "economy": ("The economy of {s} is based on {sectors}.",
                "The main industries of {s} are {sectors}.",
                "{s} is known for its {sectors} industries."),
    "currency": ("The currency of {s} is the {currency}.",
                 "{s} uses the {currency} as its currency.",
                 "In {s}, people pay with the {currency}."),
    "major_companies": ("Major companies based in {s} include {companies}.",
                        "{companies} are among the largest companies of {s}.",
                        "The largest firms in {s} include {companies}."),
    "city_kind": ("{s} is a {adjective} city in {country}.",
                  "{s} is a {adjective} city located in {country}.",
                  "The {adjective} city of {s} lies in {country}."),
    "city_population": ("{s} has about {population} inhabitants.",
                        "About {population} people live in {s}.",
                        "The city of {s} has a population of roughly {population}."),
    "city_founded": ("{s} was founded in {year}.",
                     "The city of {s} dates back to {year}.",
                     "{s} was first settled in {year}."),
    "hq_of": ("{s} is home to {companies}.",
              "The head offices of {companies} are located in {s}.",
              "Companies based in {s} include {companies}."),
    "capital_city": ("{s} is the capital of {country}.",
                     "{s} is the capital city of {country}.",
                     "{country} is governed from {s}, its capital."),
    "industry_kind": ("{s} is an industry whose companies make {products}.",
                      "Companies in {s} produce {products}.",
                      "The {s} sector covers {products}."),
    "industry_leaders": ("Leading companies in {s} include {companies}.",
                         "{companies} are among the largest companies in {s}.",
                         "The biggest names in {s} are {companies}."),
    "industry_countries": ("{s} is especially important in {countries}.",
                           "The {s} sector is strongest in {countries}.",
                           "Most companies in {s} are based in {countries}."),
}


# ---------------------------------------------------------------- the world


@dataclass(eq=False)
class _Entity:
    title: str
    qid: str = ""
    has_article: bool = True

    kind = ""


@dataclass(eq=False)
class _Country(_Entity):
    official: str = ""
    demonym: str = ""
    de_label: str = ""
    region: str = ""
    currency: str = ""
    population: str = ""
    cities: list = field(default_factory=list)
    neighbours: list = field(default_factory=list)
    companies: list = field(default_factory=list)
    kind = "country"


@dataclass(eq=False)
class _City(_Entity):
    country: _Country | None = None
    population: str = ""
    founded: int = 0
    adjective: str = ""
    is_capital: bool = False
    companies: list = field(default_factory=list)
    kind = "city"


@dataclass(eq=False)
class _Industry(_Entity):
    spec: IndustrySpec | None = None
    companies: list = field(default_factory=list)
    kind = "industry"


@dataclass(eq=False)
class _Person(_Entity):
    first: str = ""
    surname: str = ""
    female: bool = False
    country: _Country | None = None
    birth_city: _City | None = None
    birth_year: int = 0
    death_year: int = 0
    occupation: str = ""
    subject: str = ""
    university_city: _City | None = None
    founded: list = field(default_factory=list)
    ceo_of: object = None
    kind = "person"


@dataclass(eq=False)
class _Company(_Entity):
    country: _Country | None = None
    city: _City | None = None
    industry: _Industry | None = None
    founded: int = 0
    products: tuple = ()
    employees: str = ""
    founders: list = field(default_factory=list)
    ceo: _Person | None = None
    ceo_since: int = 0
    rivals: list = field(default_factory=list)
    acquired: tuple | None = None
    short_name: str = ""
    kind = "company"


@dataclass
class _World:
    countries: list
    cities: list
    industries: list
    companies: list
    people: list
    ghosts: list
    redirects: dict  # redirect title -> target title

    def articles(self) -> list:
        return [*self.countries, *self.cities, *self.industries, *self.companies, *self.people]

    def of_kind(self, kind: str) -> list:
        return {"country": self.countries, "city": self.cities, "industry": self.industries,
                "company": self.companies, "person": self.people}[kind]


class _Names:
    """Fresh fictional names, unique across the whole world (case-insensitive)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.taken: set[str] = set()

    def claim(self, name: str) -> bool:
        if name.casefold() in self.taken:
            return False
        self.taken.add(name.casefold())
        return True

    def stem(self, syllables: int | None = None) -> str:
        while True:
            count = syllables or self.rng.choice((2, 2, 3))
            parts = self.rng.sample(SYLLABLES, count)
            word = "".join(parts).capitalize()
            if 4 <= len(word) <= 9 and word.casefold() not in self.taken:
                return word

    def unique(self, make) -> str:
        while True:
            name = make()
            if self.claim(name):
                return name


def _round_significant(value: float, digits: int) -> int:
    return int(float(f"{value:.{digits}g}"))


def _make_countries(rng: random.Random, names: _Names, count: int) -> list[_Country]:
    countries = []
    for _ in range(count):
        ending, trail, de_ending = rng.choice(COUNTRY_ENDINGS)

        def make(ending=ending):
            stem = names.stem()
            return (stem[:-1] if stem[-1] in "aeiou" and ending[0] in "aeiou" else stem) + ending

        title = names.unique(make)
        official = rng.choice(OFFICIAL_FORMS).format(title)
        names.claim(official)
        demonym = title + trail
        countries.append(_Country(
            title=title, official=official, demonym=demonym,
            de_label=title[: len(title) - len(ending)] + de_ending, region=rng.choice(REGIONS),
            currency=f"{demonym} {rng.choice(CURRENCIES)}", population=f"{rng.uniform(0.8, 40):.1f} million"))
    for country in countries:
        for neighbour in rng.sample(countries, min(len(countries), rng.randint(1, 3))):
            if neighbour is not country and neighbour not in country.neighbours:
                country.neighbours.append(neighbour)
                neighbour.neighbours.append(country)
    return countries


def _make_cities(rng: random.Random, names: _Names, countries: list[_Country]) -> list[_City]:
    cities = []
    for country in countries:
        for number in range(1 if rng.random() < 0.5 else 2):
            title = names.unique(lambda: names.stem() + rng.choice(CITY_ENDINGS))
            exponent = rng.uniform(5.3, 6.3) if number == 0 else rng.uniform(4.3, 5.5)
            population = _round_significant(10**exponent, 3)
            city = _City(title=title, country=country, population=f"{population:,}", founded=rng.randint(900, 1800),
                         adjective=rng.choice(CITY_ADJECTIVES), is_capital=number == 0)
            country.cities.append(city)
            cities.append(city)
    return cities


def _make_people(rng: random.Random, names: _Names, countries: list[_Country], count: int,
                 with_article: bool = True) -> list[_Person]:
    people = []
    for _ in range(count):
        female = rng.random() < 0.5
        first = rng.choice(FEMALE_NAMES if female else MALE_NAMES)
        surname = ""

        def make():
            nonlocal surname
            surname = names.stem(2) + rng.choice(SURNAME_ENDINGS)
            return f"{first} {surname}"

        title = names.unique(make)
        country = rng.choice(countries)
        people.append(_Person(
            title=title, has_article=with_article, first=first, surname=surname, female=female, country=country,
            birth_city=rng.choice(country.cities), occupation=rng.choice(OCCUPATIONS),
            subject=rng.choice(SUBJECTS), university_city=rng.choice(country.cities)))
    return people


def _spread(rng: random.Random, count: int, bins: list) -> list:
    """``count`` picks from ``bins``: every bin at least twice when possible, the rest at random."""
    picks = [bins[i % len(bins)] for i in range(min(count, 2 * len(bins)))]
    picks += [rng.choice(bins) for _ in range(count - len(picks))]
    rng.shuffle(picks)
    return picks


def _least_used(rng: random.Random, candidates: list, uses: dict) -> object:
    fewest = min(uses[id(p)] for p in candidates)
    return rng.choice([p for p in candidates if uses[id(p)] == fewest])


def _make_companies(rng: random.Random, countries, industries, people, ghosts, count) -> list[_Company]:
    companies = []
    uses = {id(p): 0 for p in people}
    for country, industry in zip(_spread(rng, count, countries), _spread(rng, count, industries)):
        compatriots = [p for p in people if p.country is country]
        pool = compatriots if compatriots and rng.random() < 0.75 else people
        founders = [_least_used(rng, pool, uses)]
        if rng.random() < 0.2:
            second = _least_used(rng, people, uses)
            if second is not founders[0]:
                founders.append(second)
        for founder in founders:
            uses[id(founder)] += 1
        employees = _round_significant(10 ** rng.uniform(1.7, 5), 2)
        companies.append(_Company(
            title="", country=country, city=rng.choice(country.cities), industry=industry,
            founded=rng.randint(1965, 2020), products=tuple(rng.sample(industry.spec.products, 2)),
            employees=f"{employees:,}", founders=founders))
    for ghost, company in zip(ghosts, rng.sample(companies, len(ghosts))):
        company.founders.append(ghost)
    return companies


def _name_companies(rng: random.Random, names: _Names, companies: list[_Company]) -> None:
    demonym_used: set[str] = set()
    for company in companies:
        suffix = rng.choice(company.industry.spec.suffixes)
        style = rng.random()
        founder = company.founders[0]
        stem = names.stem()
        if style < 0.25 and founder.has_article:
            candidate = f"{founder.surname} {suffix}"
        elif style < 0.4 and company.country.demonym not in demonym_used:
            candidate = f"{company.country.demonym} {suffix}"
            demonym_used.add(company.country.demonym)
        elif style < 0.5:
            candidate = f"{stem} {rng.choice(COMPANY_GROUP_WORDS)}"
        else:
            candidate = f"{stem} {suffix}"
            if rng.random() < 0.15 and names.claim(stem):
                company.short_name = stem
        company.title = candidate if names.claim(candidate) else names.unique(lambda: f"{names.stem()} {suffix}")
    _give_special_names(rng, names, companies)


def _give_special_names(rng: random.Random, names: _Names, companies: list[_Company]) -> None:
    """One title with "&" and one with ":", to exercise escaping and index parsing."""
    plain = [c for c in companies if not c.short_name]
    with_amp, with_colon = plain[0], plain[1]
    surnames = [p.surname for p in with_amp.founders if p.has_article]
    partner = names.stem(2) + rng.choice(SURNAME_ENDINGS)
    with_amp.title = names.unique(lambda: f"{surnames[0] if surnames else names.stem()} & {partner}")
    suffix = rng.choice(with_colon.industry.spec.suffixes)
    with_colon.title = names.unique(lambda: f"{names.stem()}:{suffix}")


def _assign_roles(rng: random.Random, companies: list[_Company], people: list[_Person],
                  ghosts: list[_Person]) -> None:
    for company in companies:
        for founder in company.founders:
            founder.founded.append(company)
        same_industry = [c for c in companies if c.industry is company.industry and c is not company]
        company.rivals = rng.sample(same_industry, min(2, len(same_industry)))
    for person in people:
        free = [c for c in person.founded if c.ceo is None] if rng.random() < 0.5 else []
        free = free or [c for c in companies if c.ceo is None]
        if free and rng.random() < 0.9:
            company = rng.choice(free)
            company.ceo, person.ceo_of = person, company
            company.ceo_since = rng.randint(max(company.founded, 1995), 2024)
    for company in rng.sample(companies, max(1, len(companies) // 10)):
        targets = [c for c in company.industry.companies if c is not company and c.acquired is None]
        if targets:
            target = rng.choice(targets)
            company.acquired = (target, rng.randint(max(company.founded, target.founded) + 1, 2025))
    for person in [*people, *ghosts]:
        years = [c.founded for c in person.founded] + ([person.ceo_of.ceo_since] if person.ceo_of else [])
        person.birth_year = min(years or [rng.randint(1960, 1990)]) - rng.randint(24, 40)
        if person.birth_year < 1940 and person.ceo_of is None and rng.random() < 0.6:
            last = max(years or [person.birth_year + 60])
            low, high = max(person.birth_year + 70, last + 3), min(2024, person.birth_year + 95)
            person.death_year = rng.randint(low, high) if low <= high else 0


def _make_redirects(rng: random.Random, names: _Names, world: _World) -> dict[str, str]:
    redirects = {c.official: c.title for c in world.countries}
    redirects.update({c.short_name: c.title for c in world.companies if c.short_name})
    for person in world.people:
        if rng.random() < 0.05:
            alias = f"{person.first} {names.stem(1)[0]}. {person.surname}"
            if names.claim(alias):
                redirects[alias] = person.title
    return redirects


def _assign_qids(rng: random.Random, entities: list) -> None:
    order = list(entities)
    rng.shuffle(order)
    number = 1000
    for entity in order:
        number += rng.randint(1, 4)
        entity.qid = f"Q{number}"


def _build_world(rng: random.Random, scale: int) -> _World:
    names = _Names(rng)
    countries = _make_countries(rng, names, 20 * scale)
    cities = _make_cities(rng, names, countries)
    industries = []
    for spec in INDUSTRIES[: min(len(INDUSTRIES), 12 * scale)]:
        names.claim(spec.title)
        industries.append(_Industry(title=spec.title, spec=spec))
    people = _make_people(rng, names, countries, 80 * scale)
    ghosts = _make_people(rng, names, countries, 2 * scale, with_article=False)
    companies = _make_companies(rng, countries, industries, people, ghosts, 150 * scale)
    _name_companies(rng, names, companies)
    for company in companies:
        company.country.companies.append(company)
        company.city.companies.append(company)
        company.industry.companies.append(company)
    _assign_roles(rng, companies, people, ghosts)
    world = _World(countries, cities, industries, companies, people, ghosts, {})
    world.redirects = _make_redirects(rng, names, world)
    _assign_qids(rng, [*world.articles(), *ghosts])
    return world


# ---------------------------------------------------------------- facts and sentences


class Ref(NamedTuple):
    """A mention of an entity: linked in articles, plain text in STS pairs."""

    entity: _Entity
    text: str


class Text(NamedTuple):
    """A value written one way in plain sentences and another in wikitext."""

    plain: str
    wiki: str


class Fact(NamedTuple):
    kind: str
    subject: _Entity
    slots: dict


def _ref(entity: _Entity, text: str | None = None) -> Ref:
    return Ref(entity, entity.title if text is None else text)


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _plain(value) -> str:
    if isinstance(value, Ref):
        return value.text
    if isinstance(value, Text):
        return value.plain
    if isinstance(value, list):
        return _join([_plain(v) for v in value])
    return str(value)


_AN = re.compile(r"\b([Aa]) (?=\[\[[^\]|]*\|[aeiouAEIOU]|\[\[[aeiouAEIOU][^\]|]*\]\]|[aeiouAEIOU])")


def _finish(sentence: str) -> str:
    sentence = _AN.sub(lambda m: m.group(1) + "n ", sentence)
    return sentence[0].upper() + sentence[1:] if sentence[:1].islower() else sentence


def _company_facts(c: _Company) -> list[Fact]:
    spec = c.industry.spec
    kind = Text(spec.kind, spec.kind_wiki)
    facts = [
        Fact("company_kind", c, {"kind": kind, "city": _ref(c.city), "country": _ref(c.country),
                                 "demonym": _ref(c.country, c.country.demonym)}),
        Fact("founded", c, {"year": c.founded, "founders": [_ref(p) for p in c.founders]}),
        Fact("products", c, {"p1": c.products[0], "p2": c.products[1]}),
        Fact("employees", c, {"employees": c.employees}),
    ]
    if c.ceo:
        facts.append(Fact("ceo", c, {"ceo": _ref(c.ceo), "year": c.ceo_since}))
    if c.rivals:
        facts.append(Fact("rivals", c, {"rivals": [_ref(r) for r in c.rivals], "market": spec.market}))
    if c.acquired:
        facts.append(Fact("acquired", c, {"target": _ref(c.acquired[0]), "year": c.acquired[1]}))
    return facts


def _person_facts(p: _Person) -> list[Fact]:
    facts = [
        Fact("person_kind", p, {"demonym": _ref(p.country, p.country.demonym),
                                "occupation": Text(p.occupation, f"[[{p.occupation}]]"),
                                "country": _ref(p.country)}),
        Fact("born", p, {"city": _ref(p.birth_city), "country": _ref(p.country), "year": p.birth_year,
                         "demonym": _ref(p.country, p.country.demonym)}),
        Fact("studied", p, {"subject": p.subject, "university": f"University of {p.university_city.title}"}),
    ]
    facts += [Fact("founder_of", p, {"company": _ref(c), "year": c.founded}) for c in p.founded]
    if p.ceo_of:
        facts.append(Fact("ceo_of", p, {"company": _ref(p.ceo_of), "year": p.ceo_of.ceo_since}))
    return facts


def _country_facts(c: _Country) -> list[Fact]:
    facts = [
        Fact("country_kind", c, {"official": Text(c.official, f"'''{c.official}'''"), "region": c.region}),
        Fact("capital", c, {"capital": _ref(c.cities[0])}),
        Fact("population", c, {"population": Text(c.population, c.population.replace(" ", "&nbsp;"))}),
        Fact("currency", c, {"currency": c.currency}),
    ]
    if c.neighbours:
        facts.append(Fact("borders", c, {"neighbours": [_ref(n) for n in c.neighbours]}))
    sectors = _top_industries(c.companies)
    if sectors:
        facts.append(Fact("economy", c, {"sectors": [_ref(i, i.spec.sector) for i in sectors]}))
    if c.companies:
        facts.append(Fact("major_companies", c, {"companies": [_ref(x) for x in c.companies[:3]]}))
    return facts


def _top_industries(companies: list[_Company]) -> list[_Industry]:
    counts: dict[int, list] = {}
    for company in companies:
        counts.setdefault(id(company.industry), [company.industry, 0])[1] += 1
    ranked = sorted(counts.values(), key=lambda pair: (-pair[1], pair[0].title))
    return [industry for industry, _ in ranked[:3]]


def _city_facts(c: _City) -> list[Fact]:
    facts = [
        Fact("city_kind", c, {"adjective": c.adjective, "country": _ref(c.country)}),
        Fact("city_population", c, {"population": c.population}),
        Fact("city_founded", c, {"year": c.founded}),
    ]
    if c.is_capital:
        facts.append(Fact("capital_city", c, {"country": _ref(c.country)}))
    if c.companies:
        facts.append(Fact("hq_of", c, {"companies": [_ref(x) for x in c.companies[:3]]}))
    return facts


def _industry_facts(i: _Industry) -> list[Fact]:
    facts = [Fact("industry_kind", i, {"products": _join(list(i.spec.products[:3]))})]
    if i.companies:
        facts.append(Fact("industry_leaders", i, {"companies": [_ref(x) for x in i.companies[:3]]}))
        countries = []
        for company in i.companies:
            if company.country not in countries:
                countries.append(company.country)
        facts.append(Fact("industry_countries", i, {"countries": [_ref(x) for x in countries[:2]]}))
    return facts


def _facts(entity: _Entity) -> list[Fact]:
    return {"company": _company_facts, "person": _person_facts, "country": _country_facts,
            "city": _city_facts, "industry": _industry_facts}[entity.kind](entity)


def _subject_text(entity: _Entity) -> str:
    return entity.spec.sector if isinstance(entity, _Industry) else entity.title


def plain_sentence(fact: Fact, template: int) -> str:
    """The fact written with template number ``template``, in plain text."""
    slots = {name: _plain(value) for name, value in fact.slots.items()}
    sentence = TEMPLATES[fact.kind][template].format(s=_subject_text(fact.subject), **slots)
    return _finish(_past_tense_if_dead(fact.subject, sentence))


def _past_tense_if_dead(subject: _Entity, sentence: str) -> str:
    if isinstance(subject, _Person) and subject.death_year:
        return sentence.replace(" is a ", " was a ", 1).replace(" is the founder", " was the founder", 1)
    return sentence


# ---------------------------------------------------------------- wikitext


class _Linker:
    """Writes ``[[…]]`` links the way editors do: plain, piped, with link
    trails, through redirects, with lowercase first letters or underscores."""

    def __init__(self, rng: random.Random, redirects: dict[str, str]):
        self.rng = rng
        self.aliases: dict[str, list[str]] = {}
        for source, target in sorted(redirects.items()):
            self.aliases.setdefault(target, []).append(source)

    def link(self, ref: Ref) -> str:
        title, text = ref.entity.title, ref.text
        if not ref.entity.has_article or self.rng.random() < 0.08:
            return text
        if title in self.aliases and self.rng.random() < 0.25:
            alias = self.rng.choice(self.aliases[title])
            return f"[[{alias}]]" if text == alias else f"[[{alias}|{text}]]"
        roll = self.rng.random()
        if roll < 0.03 and " " in title:
            return f"[[{title.replace(' ', '_')}|{text}]]"
        if roll < 0.06:
            return f"[[{title[0].lower()}{title[1:]}|{text}]]"
        if roll < 0.08 and isinstance(ref.entity, _Company):
            return f"[[{title}#History|{text}]]"
        return self._direct(title, text)

    @staticmethod
    def _direct(title: str, text: str) -> str:
        if text == title or text[:1].upper() + text[1:] == title:
            return f"[[{text}]]"
        head = text[: len(title)]
        rest = text[len(title):]
        if head[:1].upper() + head[1:] == title and rest.isalpha():
            return f"[[{head}]]{rest}"
        return f"[[{title}|{text}]]"


class _Writer:
    """Renders facts and article furniture (refs, infoboxes, files) as wikitext."""

    def __init__(self, rng: random.Random, linker: _Linker):
        self.rng = rng
        self.linker = linker

    def value(self, value) -> str:
        if isinstance(value, Ref):
            return self.linker.link(value)
        if isinstance(value, Text):
            return value.wiki
        if isinstance(value, list):
            return _join([self.value(v) for v in value])
        return str(value)

    def sentence(self, fact: Fact, subject: str | None = None, lead: bool = False) -> str:
        templates = TEMPLATES[fact.kind]
        choices = [t for t in templates if t.startswith("{s}")] if lead else list(templates)
        template = self.rng.choice(choices or templates)
        slots = {name: self.value(value) for name, value in fact.slots.items()}
        sentence = template.format(s=subject or self.subject(fact.subject, template), **slots)
        return _finish(_past_tense_if_dead(fact.subject, sentence))

    def subject(self, entity: _Entity, template: str) -> str:
        if isinstance(entity, _Industry):
            return entity.spec.sector
        if isinstance(entity, _Person):
            return self.rng.choice([entity.surname, "she" if entity.female else "he"])
        if "city of {s}" in template or self.rng.random() < 0.6:
            return entity.title
        return f"the {entity.kind}"

    def cite(self, entity: _Entity, name: str | None = None) -> str:
        site = _slug(entity.title)
        page = self.rng.choice(("about", "history", "news/annual-report", "press"))
        body = (f"{{{{cite web |url=https://www.{site}.example/{page} |title={entity.title}: "
                f"{page.split('/')[-1].replace('-', ' ')} |website={entity.title} |access-date=1 January 2026}}}}")
        return f'<ref name="{name}">{body}</ref>' if name else f"<ref>{body}</ref>"

    def news_cite(self, city: _City, year: int) -> str:
        return (f"<ref>{{{{cite news |url=https://herald.{_slug(city.title)}.example/{year} "
                f"|title=Business pages |work=''The {city.title} Herald'' |date=12 March {year}}}}}</ref>")

    def paragraph(self, sentences: list[str]) -> str:
        return " ".join(s for s in sentences if s)


def _slug(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")


def _infobox(name: str, fields: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in fields)
    rows = [f"| {key.ljust(width)} = {value}" for key, value in fields if value]
    return "{{" + name + "\n" + "\n".join(rows) + "\n}}"


def _layout(head: list[str], sections: list[tuple[str, list[str]]], tail: list[str]) -> str:
    """Wikitext page: head lines (hatnotes, infobox, lead), ``== sections ==``, then tail lines (categories)."""
    blocks = ["\n".join(line for line in head if line)]
    blocks += [f"== {title} ==\n" + "\n\n".join(b for b in body if b) for title, body in sections if any(body)]
    blocks.append("\n".join(tail))
    return "\n\n".join(blocks)


def _company_article(c: _Company, w: _Writer) -> str:
    facts = {f.kind: f for f in _facts(c)}
    rng = w.rng
    founders = "<br />".join(w.value(_ref(p)) for p in c.founders)
    infobox = _infobox("Infobox company", [
        ("name", c.title), ("logo", f"{c.title} logo.svg"),
        ("type", rng.choice(("[[Public company|Public]]", "[[Privately held company|Private]]"))),
        ("industry", f"[[{c.industry.title}]]"), ("founded", f"{{{{start date and age|{c.founded}}}}}"),
        ("founders", founders), ("hq_location_city", w.value(_ref(c.city))),
        ("hq_location_country", f"{{{{flag|{c.country.title}}}}}"),
        ("key_people", f"{w.value(_ref(c.ceo))} ([[Chief executive officer|CEO]])" if c.ceo else ""),
        ("products", "{{hlist|" + "|".join(p.capitalize() for p in c.products) + "}}"),
        ("num_employees", c.employees), ("num_employees_year", "2025"),
        ("website", f"{{{{URL|https://www.{_slug(c.title)}.example}}}}"),
    ])
    lead = w.paragraph([w.sentence(facts["company_kind"], f"'''{c.title}'''", lead=True) + w.cite(c, "profile"),
                        w.sentence(facts["products"])])
    history = [w.sentence(facts["founded"]) + w.news_cite(c.city, c.founded + 1)]
    if "acquired" in facts:
        history.append(w.sentence(facts["acquired"]))
    decade = (min(c.founded + rng.randint(5, 20), 2015) // 10) * 10
    history.append(f"According to ''The {c.city.title} Herald'', the company's sales of {c.products[0]} "
                   f"grew quickly during the {decade}s.")
    picture = (f"[[File:{c.title.replace(':', ' ')} headquarters.jpg|thumb|The headquarters of {w.value(_ref(c))} "
               f"in {w.value(_ref(c.city))}]]")
    comment = "<!-- Founding year per the company's annual report; do not change without a source. -->\n"
    operations = [w.paragraph([w.sentence(facts["employees"]) + '<ref name="profile" />'])]
    if rng.random() < 0.3:
        operations.append(_key_figures_table(rng, c))
    sections = [
        ("History", [comment + w.paragraph(history), picture]),
        ("Operations", operations),
        ("Leadership", [w.sentence(facts["ceo"])] if "ceo" in facts else []),
        ("Competition", [w.sentence(facts["rivals"]) + '<ref name="profile" />'] if "rivals" in facts else []),
        ("References", ["{{Reflist}}"]),
        ("External links", [f"* {{{{Official website|https://www.{_slug(c.title)}.example}}}}"]),
    ]
    categories = [f"[[Category:{c.industry.spec.sector.capitalize()} companies]]",
                  f"[[Category:Companies of {c.country.title}]]", f"[[Category:Companies established in {c.founded}]]"]
    if rng.random() < 0.1:
        categories.append(f"[[de:{c.title}]]")
    head = ["{{Short description|" + f"{c.country.demonym} {c.industry.spec.kind}" + "}}",
            "{{Use dmy dates|date=January 2026}}", infobox, lead]
    return _layout(head, sections, categories)


def _key_figures_table(rng: random.Random, c: _Company) -> str:
    header = f"! Year !! Revenue (million {c.country.currency}s) !! Employees"
    rows = ['{| class="wikitable"', "|+ Key figures", header]
    employees = int(c.employees.replace(",", ""))
    for year in (2023, 2024, 2025):
        revenue = max(1, int(employees * rng.uniform(0.05, 0.4)))
        rows += ["|-", f"| {year} || {revenue:,} || {int(employees * rng.uniform(0.9, 1.0)):,}"]
    return "\n".join(rows + ["|}"])


def _person_article(p: _Person, w: _Writer) -> str:
    facts = _facts(p)
    by_kind = {f.kind: f for f in facts}
    life = f"{p.birth_year}–{p.death_year}" if p.death_year else f"born {p.birth_year}"
    birth_date = f"{{{{birth year|{p.birth_year}}}}}" if p.death_year else f"{{{{birth year and age|{p.birth_year}}}}}"
    infobox = _infobox("Infobox person", [
        ("name", p.title), ("image", f"{p.title} 2019.jpg"), ("birth_date", birth_date),
        ("birth_place", f"{w.value(_ref(p.birth_city))}, {w.value(_ref(p.country))}"),
        ("death_date", f"{{{{death year and age|{p.death_year}|{p.birth_year}}}}}" if p.death_year else ""),
        ("nationality", w.value(_ref(p.country, p.country.demonym))),
        ("occupation", p.occupation.capitalize()),
        ("known_for", "Founding " + w.value(_ref(p.founded[0])) if p.founded else ""),
    ])
    lead = w.sentence(by_kind["person_kind"], f"'''{p.title}''' ({life})", lead=True)
    career = [w.sentence(f) for f in facts if f.kind in ("founder_of", "ceo_of")]
    if p.founded and w.rng.random() < 0.5:
        pronoun = "she" if p.female else "he"
        career.append(f"In a 2019 interview with ''{p.country.demonym} Business Weekly'', {pronoun} "
                      f"described {p.founded[0].title} as \"a company built on patience\".")
    sections = [("Early life", [w.paragraph([w.sentence(by_kind["born"]), w.sentence(by_kind["studied"])])]),
                ("Career", [w.paragraph(career)]), ("References", ["{{Reflist}}"])]
    tail = [f"{{{{DEFAULTSORT:{p.surname}, {p.first}}}}}", f"[[Category:{p.birth_year} births]]",
            f"[[Category:{p.death_year} deaths]]" if p.death_year else "[[Category:Living people]]",
            f"[[Category:{p.country.demonym} businesspeople]]"]
    head = ["{{Short description|" + f"{p.country.demonym} {p.occupation}" + "}}", infobox, lead]
    return _layout(head, sections, tail)


def _country_article(c: _Country, w: _Writer) -> str:
    facts = {f.kind: f for f in _facts(c)}
    region = c.region.removeprefix("the ")
    infobox = _infobox("Infobox country", [
        ("conventional_long_name", c.official), ("common_name", c.title),
        ("capital", w.value(_ref(c.cities[0]))), ("largest_city", "capital"), ("demonym", c.demonym),
        ("population_estimate", "{{circa}} " + c.population), ("currency", c.currency),
    ])
    lead = [w.sentence(facts["country_kind"], f"'''{c.title}'''", lead=True), w.sentence(facts["capital"]),
            w.sentence(facts["population"]) + w.cite(c, "census")]
    if "borders" in facts:
        lead.insert(1, w.sentence(facts["borders"]))
    economy = [w.sentence(facts[k]) for k in ("economy", "major_companies") if k in facts]
    economy.append(w.sentence(facts["currency"]) + '<ref name="census" />')
    cities = "\n".join(f"* {w.value(_ref(city))}" + (" (capital)" if city.is_capital else "") for city in c.cities)
    sections = [("Economy", [w.paragraph(economy)]), ("Cities", [cities]), ("References", ["{{Reflist}}"])]
    head = ["{{Short description|Country in " + region + "}}", infobox, w.paragraph(lead)]
    return _layout(head, sections, [f"[[Category:Countries in {region}]]"])


def _city_article(c: _City, w: _Writer) -> str:
    facts = {f.kind: f for f in _facts(c)}
    infobox = _infobox("Infobox settlement", [
        ("name", c.title), ("settlement_type", "[[Capital city|Capital]]" if c.is_capital else "City"),
        ("subdivision_type", "Country"), ("subdivision_name", f"{{{{flag|{c.country.title}}}}}"),
        ("population_total", c.population), ("established_date", str(c.founded)),
    ])
    lead = [w.sentence(facts["city_kind"], f"'''{c.title}'''", lead=True)]
    if "capital_city" in facts:
        lead.append(w.sentence(facts["capital_city"]))
    lead.append(w.sentence(facts["city_population"]))
    sections = [("History", [w.sentence(facts["city_founded"])]),
                ("Economy", [w.sentence(facts["hq_of"])] if "hq_of" in facts else [])]
    return _layout([infobox, w.paragraph(lead)], sections, [f"[[Category:Cities in {c.country.title}]]"])


def _industry_article(i: _Industry, w: _Writer) -> str:
    facts = {f.kind: f for f in _facts(i)}
    head = ["{{Short description|Industry}}",
            "{{About|the industry|the list of companies|" + f"[[:Category:{i.title} companies]]" + "}}",
            w.sentence(facts["industry_kind"], f"'''{i.title}'''", lead=True)]
    companies = [w.paragraph([w.sentence(facts[k]) for k in ("industry_leaders", "industry_countries")])] \
        if "industry_leaders" in facts else []
    sections = [("Companies", companies),
                ("See also", [f"* [[:Category:{i.title} companies|List of {i.spec.sector} companies]]"])]
    return _layout(head, sections, ["[[Category:Industries]]"])


def _article(entity: _Entity, w: _Writer) -> str:
    return {"company": _company_article, "person": _person_article, "country": _country_article,
            "city": _city_article, "industry": _industry_article}[entity.kind](entity, w)


def _break_markup(text: str, kind: str) -> str:
    """Damage a page the way careless edits do: an unclosed ``{{`` or ``[[``."""
    marker = "== History ==" if kind == "company" else "== Early life =="
    broken = ("{{cite web |url=https://archive.example/report |title=Annual report"
              if kind == "company" else "The family later moved to [[Riverside and opened a bakery.")
    return text.replace(marker, marker + "\n" + broken, 1)


def _stub_article(p: _Person) -> str:
    return ("{{Short description|" + f"{p.country.demonym} businessperson" + "}}\n"
            f"'''{p.title}'''\n\n{{{{{p.country.title}-business-bio-stub}}}}\n[[Category:Living people]]")


def _redirect_text(rng: random.Random, target: str, reason: str) -> str:
    keyword = "#redirect" if rng.random() < 0.1 else "#REDIRECT"
    return f"{keyword} [[{target}]]\n\n{{{{Redirect category shell|\n{{{{{reason}}}}}\n}}}}"


def _non_article_pages(world: _World) -> list[tuple[str, int, str]]:
    first = world.countries[0]
    return [
        ("Demowiki:About", 4, "'''Demowiki''' is a small fictional encyclopedia about the countries, companies "
         f"and people of {first.region}. See [[{first.title}]] or [[:Category:Companies]].\n\n"
         "[[Category:Demowiki]]"),
        ("Template:Infobox company", 10, "{{Infobox\n| above = {{{name|{{PAGENAME}}}}}\n| label1 = Industry\n"
         "| data1 = {{{industry|}}}\n| label2 = Founded\n| data2 = {{{founded|}}}\n}}<noinclude>\n"
         "{{Documentation}}\n</noinclude>"),
        ("Template:Flag", 10, "[[File:Flag of {{{1}}}.svg|23px]]&nbsp;[[{{{1}}}]]<noinclude>{{Documentation}}"
         "</noinclude>"),
        ("Category:Companies", 14, "Companies of Demowiki.\n\n[[Category:Organizations]]"),
        ("Category:Living people", 14, "{{Category diffuse}}\nPeople who are alive.\n\n[[Category:People]]"),
        (f"Category:Companies of {first.title}", 14,
         f"Companies based in [[{first.title}]].\n\n[[Category:Companies]]"),
    ]


class _Page(NamedTuple):
    title: str
    ns: int
    text: str
    redirect: str | None


def _pages(rng: random.Random, world: _World) -> tuple[list[_Page], dict]:
    writer = _Writer(rng, _Linker(rng, world.redirects))
    companies, people = world.companies, world.people
    specials = {"broken_markup": [companies[2].title, people[1].title], "stub": [people[0].title]}
    pages = []
    for entity in world.articles():
        if entity.title in specials["stub"]:
            text = _stub_article(entity)
        else:
            text = _article(entity, writer)
        if entity.title in specials["broken_markup"]:
            text = _break_markup(text, entity.kind)
        pages.append(_Page(entity.title, 0, text, None))
    reasons = {**{c.title: "R from long name" for c in world.countries},
               **{p.title: "R from alternative name" for p in world.people}}
    for source, target in world.redirects.items():
        reason = reasons.get(target, "R from short name")
        pages.append(_Page(source, 0, _redirect_text(rng, target, reason), target))
    non_articles = _non_article_pages(world)
    pages += [_Page(title, ns, text, None) for title, ns, text in non_articles]
    specials["non_article"] = [title for title, _, _ in non_articles]
    rng.shuffle(pages)
    return pages, specials


# ---------------------------------------------------------------- the German wiki


OFFICIAL_FORMS_DE = {"Republic of {}": "Republik {}", "Kingdom of {}": "Königreich {}",
                     "Federal Republic of {}": "Bundesrepublik {}", "Grand Duchy of {}": "Großherzogtum {}",
                     "United Provinces of {}": "Vereinigte Provinzen von {}"}
REGIONS_DE = {"the Northern Reach": "im Nordreich", "the Amber Coast": "an der Bernsteinküste",
              "the Sarn Basin": "im Sarnbecken", "the Eastern Marches": "in den Ostmarken",
              "the Halcyon Archipelago": "im Halkyonischen Archipel"}
CITY_SUFFIXES_DE = (("port", "hafen"), ("ford", "furt"), ("stad", "stadt"), ("vik", "wik"))
CITY_KINDS_DE = {"port": "Hafenstadt", "industrial": "Industriestadt", "historic": "historische Stadt",
                 "cathedral": "Domstadt", "market": "Marktstadt"}
UMLAUTS = {"a": "ä", "o": "ö", "u": "ü"}
COMPANY_SUFFIXES_DE = ((" Group", "-Gruppe"), (" Holdings", " Holding"))
COMPANY_QUALIFIER_DE = " (Unternehmen)"
OCCUPATIONS_DE = {"entrepreneur": ("Unternehmer", "Unternehmerin"), "engineer": ("Ingenieur", "Ingenieurin"),
                  "business executive": ("Manager", "Managerin"), "economist": ("Ökonom", "Ökonomin"),
                  "investor": ("Investor", "Investorin"), "chemist": ("Chemiker", "Chemikerin")}
SUBJECTS_DE = {"economics": "Volkswirtschaftslehre", "engineering": "Ingenieurwissenschaften",
               "chemistry": "Chemie", "law": "Rechtswissenschaft",
               "business administration": "Betriebswirtschaftslehre", "physics": "Physik",
               "computer science": "Informatik"}


def _de_number(text: str) -> str:
    """``1,230,000`` → ``1.230.000``; ``12.3 million`` → ``12,3 Millionen``."""
    if text.endswith(" million"):
        return text.split()[0].replace(".", ",") + " Millionen"
    return text.replace(",", ".")


def _de_join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " und " + words[-1]


@dataclass
class _DeWiki:
    """The German wiki: which entities it covers, their titles, labels and the redirects."""

    entities: list  # in world order: countries, cities, industries, companies, people (ghosts last)
    titles: dict  # id(entity) -> German title
    labels: dict  # id(entity) -> German label (the title without a "(…)" qualifier)
    redirects: dict  # redirect title -> target title
    official: dict  # id(country) -> German official name (a redirect to the country)

    def has(self, entity) -> bool:
        return id(entity) in self.titles

    def title(self, entity) -> str:
        return self.titles[id(entity)]

    def label(self, entity) -> str:
        return self.labels[id(entity)]


def _dewiki_subset(world: _World, scale: int) -> list:
    """A deterministic subset of the world for the German wiki: the first countries, companies of those
    countries (and the companies founded by people without an English article), their founders and chief
    executives from those countries, the people without an English article, the countries all of these are
    from, the cities of those countries and the industries of the companies."""
    countries = list(world.countries[: 4 * scale])
    companies = []
    for ghost in world.ghosts:
        companies += [c for c in ghost.founded if c not in companies]
    others = [c for c in world.companies if c.country in countries and c not in companies]
    companies += others[: 8 * scale - len(companies)]
    people = []
    for company in companies:
        for person in [*company.founders, company.ceo]:
            if person is not None and person.has_article and person.country in countries and person not in people:
                people.append(person)
    people += list(world.ghosts)
    for entity in [*companies, *people]:
        if entity.country not in countries:
            countries.append(entity.country)
    countries = [c for c in world.countries if c in countries]
    cities = [city for city in world.cities if city.country in countries]
    industries = [i for i in world.industries if any(c.industry is i for c in companies)]
    companies = [c for c in world.companies if c in companies]
    people = [p for p in world.people if p in people] + [g for g in world.ghosts if g in people]
    return [*countries, *cities, *industries, *companies, *people]


def _de_city_name(rng: random.Random, title: str) -> str:
    for ending, de_ending in CITY_SUFFIXES_DE:
        if title.endswith(ending) and len(title) > len(ending):
            return title[: -len(ending)] + de_ending
    if rng.random() < 0.4:
        for position, char in enumerate(title[1:-1], start=1):
            if char in UMLAUTS:
                return title[:position] + UMLAUTS[char] + title[position + 1:]
    return title


def _de_company_name(rng: random.Random, title: str) -> str:
    for ending, de_ending in COMPANY_SUFFIXES_DE:
        if title.endswith(ending):
            return title[: -len(ending)] + de_ending
    if rng.random() < 0.35 and ":" not in title and "&" not in title:
        return title + COMPANY_QUALIFIER_DE
    return title


def _make_dewiki(rng: random.Random, world: _World, scale: int) -> _DeWiki:
    entities = _dewiki_subset(world, scale)
    taken: set[str] = set()
    titles, labels, official = {}, {}, {}

    def claim(title: str, qualifier: str) -> str:
        if title.casefold() in taken:
            title += qualifier
        taken.add(title.casefold())
        return title

    for entity in entities:
        if isinstance(entity, _Country):
            title = claim(entity.de_label, " (Staat)")
        elif isinstance(entity, _City):
            title = claim(_de_city_name(rng, entity.title), " (Stadt)")
        elif isinstance(entity, _Industry):
            title = claim(entity.spec.de, " (Wirtschaftszweig)")
        elif isinstance(entity, _Company):
            title = claim(_de_company_name(rng, entity.title), COMPANY_QUALIFIER_DE)
        else:
            title = claim(entity.title, " (Unternehmer)")
        titles[id(entity)] = title
        labels[id(entity)] = entity.de_label if isinstance(entity, _Country) else re.sub(r" \([^()]*\)$", "", title)
    companies = [e for e in entities if isinstance(e, _Company)]
    if all(titles[id(c)] == c.title for c in companies):  # at least one company title differs, whatever the seed
        titles[id(companies[0])] = claim(companies[0].title + COMPANY_QUALIFIER_DE, "")
    redirects = {}
    for entity in entities:
        title = titles[id(entity)]
        if isinstance(entity, _Country):
            form = next(f for f in OFFICIAL_FORMS if f.format(entity.title) == entity.official)
            source = OFFICIAL_FORMS_DE[form].format(labels[id(entity)])
            official[id(entity)] = source
        elif isinstance(entity, (_City, _Company)) and title != entity.title:
            source = entity.title  # the English name
        else:
            continue
        if source.casefold() not in taken:
            taken.add(source.casefold())
            redirects[source] = title
    return _DeWiki(entities, titles, labels, redirects, {k: v for k, v in official.items() if v in redirects})


class _DeWriter:
    """Writes the German articles: every sentence links to another German article."""

    def __init__(self, rng: random.Random, de: _DeWiki):
        self.rng = rng
        self.de = de
        self.aliases: dict[str, list[str]] = {}
        for source, target in sorted(de.redirects.items()):
            self.aliases.setdefault(target, []).append(source)

    def link(self, entity: _Entity, text: str | None = None) -> str:
        title = self.de.title(entity)
        text = self.de.label(entity) if text is None else text
        if title in self.aliases and self.rng.random() < 0.2:
            alias = self.rng.choice(self.aliases[title])
            return f"[[{alias}]]" if alias == text else f"[[{alias}|{text}]]"
        return f"[[{title}]]" if text == title else f"[[{title}|{text}]]"

    def via_official_name(self, country: _Country) -> str:
        """A link through the redirect from the country's German official name."""
        source = self.de.official.get(id(country))
        return f"[[{source}|{self.de.label(country)}]]" if source else self.link(country)

    def links(self, entities: list) -> str:
        return _de_join([self.link(e) for e in entities])

    def cite(self, entity: _Entity) -> str:
        return (f"<ref>{{{{Internetquelle |url=https://www.{_slug(entity.title)}.example/ueber-uns "
                f"|titel={self.de.label(entity)}: Über uns |abruf=2026-01-01}}}}</ref>")

    def article(self, entity: _Entity) -> str:
        return {"company": self.company, "person": self.person, "country": self.country,
                "city": self.city, "industry": self.industry}[entity.kind](entity)

    def country(self, c: _Country) -> str:
        name = self.de.label(c)
        capital = c.cities[0]
        official = self.de.official.get(id(c), OFFICIAL_FORMS_DE["Republic of {}"].format(name))
        lead = [(f"'''{name}''' (amtlich ''{official}'') ist ein Staat {REGIONS_DE[c.region]} "
                 f"mit der Hauptstadt {self.link(capital)}.")]
        neighbours = [n for n in c.neighbours if self.de.has(n)]
        if neighbours:
            lead.append(f"{name} hat gemeinsame Grenzen mit {self.links(neighbours)}.")
        lead.append(f"In {name} leben etwa {_de_number(c.population)} Menschen, viele davon in der Hauptstadt "
                    f"{self.link(capital)}.")
        economy = []
        companies = [x for x in c.companies if self.de.has(x)][:3]
        if companies:
            verb = "gehört" if len(companies) == 1 else "gehören"
            economy.append(f"Zu den bekannten Unternehmen des Landes {verb} {self.links(companies)}.")
        for city in c.cities[1:]:
            economy.append(f"Eine weitere große Stadt des Landes ist {self.link(city)}.")
        infobox = _infobox("Infobox Staat", [("DEUTSCHER-NAME", name), ("AMTLICHER-NAME", official),
                                             ("HAUPTSTADT", self.link(capital)),
                                             ("EINWOHNERZAHL", _de_number(c.population))])
        sections = [("Wirtschaft und Städte", [" ".join(economy)])]
        return _layout([infobox, " ".join(lead)], sections, [f"[[Kategorie:Staat {REGIONS_DE[c.region]}]]"])

    def city(self, c: _City) -> str:
        name = self.de.label(c)
        lead = [(f"'''{name}''' ist eine {CITY_KINDS_DE[c.adjective]} in {self.link(c.country)} "
                 f"mit rund {_de_number(c.population)} Einwohnern.")]
        if c.is_capital:
            lead.append(f"{name} ist die Hauptstadt und der Regierungssitz von {self.via_official_name(c.country)}.")
        history = [f"Die Stadt wurde im Jahr {c.founded} gegründet und gehört heute zu {self.link(c.country)}."]
        companies = [x for x in c.companies if self.de.has(x)][:3]
        if companies:
            verb = "gehört" if len(companies) == 1 else "gehören"
            history.append(f"Zu den in {name} ansässigen Unternehmen {verb} {self.links(companies)}.")
        country = self.de.label(c.country)
        return _layout([" ".join(lead)], [("Geschichte und Wirtschaft", [" ".join(history)])],
                       [f"[[Kategorie:Ort in {country}]]"])

    def industry(self, i: _Industry) -> str:
        companies = [x for x in i.companies if self.de.has(x)]
        countries = []
        for company in companies:
            if company.country not in countries:
                countries.append(company.country)
        lead = (f"'''{self.de.label(i)}''' ist ein Wirtschaftszweig, der besonders in "
                f"{self.links(countries[:2])} eine große Rolle spielt.")
        verb = "gehört" if len(companies[:3]) == 1 else "gehören"
        body = f"Zu den bekannten Unternehmen der Branche {verb} {self.links(companies[:3])}."
        return _layout([lead], [("Unternehmen", [body])], ["[[Kategorie:Wirtschaftszweig]]"])

    def company(self, c: _Company) -> str:
        name = self.de.label(c)
        founders = [self.link(p) if self.de.has(p) else p.title for p in c.founders]
        infobox = _infobox("Infobox Unternehmen", [
            ("Name", name), ("Gründungsdatum", str(c.founded)),
            ("Sitz", f"{self.link(c.city)}, {self.link(c.country)}"),
            ("Leitung", self.link(c.ceo) if c.ceo and self.de.has(c.ceo) else ""),
            ("Mitarbeiterzahl", _de_number(c.employees)), ("Branche", self.link(c.industry)),
        ])
        lead = [f"'''{name}''' ist ein Unternehmen aus {self.link(c.country)} mit Sitz in {self.link(c.city)}."
                + self.cite(c),
                (f"{name} ist in der Branche {self.link(c.industry)} tätig und beschäftigt rund "
                 f"{_de_number(c.employees)} Mitarbeiter.")]
        history = [f"Das Unternehmen wurde {c.founded} von {_de_join(founders)} in {self.link(c.city)} gegründet."]
        if c.acquired and self.de.has(c.acquired[0]):
            history.append(f"Im Jahr {c.acquired[1]} übernahm {name} das Unternehmen {self.link(c.acquired[0])}.")
        leadership = []
        if c.ceo and self.de.has(c.ceo):
            role = "Vorstandsvorsitzende" if c.ceo.female else "Vorstandsvorsitzender"
            leadership.append(f"Seit {c.ceo_since} ist {self.link(c.ceo)} {role} von {name}.")
        rivals = [r for r in c.rivals if self.de.has(r)]
        if rivals:
            verb = "zählt" if len(rivals) == 1 else "zählen"
            leadership.append(f"Zu den Wettbewerbern von {name} {verb} {self.links(rivals)}.")
        sections = [("Geschichte", [" ".join(history)]), ("Leitung und Wettbewerb", [" ".join(leadership)]),
                    ("Einzelnachweise", ["<references />"])]
        categories = [f"[[Kategorie:Unternehmen ({self.de.label(c.country)})]]",
                      f"[[Kategorie:Gegründet {c.founded}]]"]
        return _layout([infobox, " ".join(lead)], sections, categories)

    def person(self, p: _Person) -> str:
        verb = "war" if p.death_year else "ist"
        article = "eine" if p.female else "ein"
        occupation = OCCUPATIONS_DE[p.occupation][p.female]
        pronoun = "Sie" if p.female else "Er"
        life = f"* {p.birth_year} in {self.link(p.birth_city)}" + (f"; † {p.death_year}" if p.death_year else "")
        lead = f"'''{p.title}''' ({life}) {verb} {article} {occupation} aus {self.link(p.country)}."
        university = self.link(p.university_city)
        career = [f"{pronoun} studierte {SUBJECTS_DE[p.subject]} an der Universität in {university}."]
        career += [f"{p.surname} gründete {c.founded} das Unternehmen {self.link(c)}."
                   for c in p.founded if self.de.has(c)]
        if p.ceo_of and self.de.has(p.ceo_of):
            role = "Vorstandsvorsitzende" if p.female else "Vorstandsvorsitzender"
            tense = "wurde" if p.death_year else "ist"
            since = "Ab" if p.death_year else "Seit"
            career.append(f"{since} {p.ceo_of.ceo_since} {tense} {p.surname} {role} von {self.link(p.ceo_of)}.")
        tail = [f"{{{{SORTIERUNG:{p.surname}, {p.first}}}}}", f"[[Kategorie:Geboren {p.birth_year}]]",
                f"[[Kategorie:Gestorben {p.death_year}]]" if p.death_year else "",
                "[[Kategorie:Frau]]" if p.female else "[[Kategorie:Mann]]"]
        return _layout([lead], [("Leben", [" ".join(career)])], [t for t in tail if t])


def _de_redirect_text(rng: random.Random, target: str) -> str:
    keyword = "#REDIRECT" if rng.random() < 0.2 else "#WEITERLEITUNG"
    return f"{keyword} [[{target}]]"


def _dewiki_pages(rng: random.Random, de: _DeWiki) -> list[_Page]:
    writer = _DeWriter(rng, de)
    pages = [_Page(de.title(e), 0, writer.article(e), None) for e in de.entities]
    pages += [_Page(source, 0, _de_redirect_text(rng, target), target) for source, target in de.redirects.items()]
    rng.shuffle(pages)
    return pages


# ---------------------------------------------------------------- Wikipedia multistream dump


NAMESPACES = ((-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"), (3, "User talk"),
              (4, "Demowiki"), (5, "Demowiki talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"),
              (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"), (13, "Help talk"),
              (14, "Category"), (15, "Category talk"), (100, "Portal"), (101, "Portal talk"), (118, "Draft"),
              (119, "Draft talk"), (710, "TimedText"), (711, "TimedText talk"), (828, "Module"),
              (829, "Module talk"))
NAMESPACES_DE = ((-2, "Medium"), (-1, "Spezial"), (0, ""), (1, "Diskussion"), (2, "Benutzer"),
                 (3, "Benutzer Diskussion"), (4, "Demowiki"), (5, "Demowiki Diskussion"), (6, "Datei"),
                 (7, "Datei Diskussion"), (8, "MediaWiki"), (9, "MediaWiki Diskussion"), (10, "Vorlage"),
                 (11, "Vorlage Diskussion"), (12, "Hilfe"), (13, "Hilfe Diskussion"), (14, "Kategorie"),
                 (15, "Kategorie Diskussion"), (100, "Portal"), (101, "Portal Diskussion"), (710, "TimedText"),
                 (711, "TimedText talk"), (828, "Modul"), (829, "Modul Diskussion"))


class _Site(NamedTuple):
    """What a dump's ``<siteinfo>`` says about its wiki, and where its page ids start."""

    dbname: str
    lang: str
    base: str
    namespaces: tuple
    pages_per_stream: int
    first_page_id: int
    first_revision: int


ENWIKI = _Site("enwiki", "en", "https://demo.wikipedia.example/wiki/Main_Page", NAMESPACES, PAGES_PER_STREAM,
               9, 1_130_000_000)
DEWIKI = _Site("dewiki", "de", "https://de.demo.wikipedia.example/wiki/Demowiki:Hauptseite", NAMESPACES_DE,
               DEWIKI_PAGES_PER_STREAM, 20, 250_000_000)


def _xml(text: str) -> str:
    return escape(text, {'"': "&quot;"})


def _siteinfo(site: _Site = ENWIKI) -> str:
    ns = "http://www.mediawiki.org/xml/export-0.11/"
    lines = [(f'<mediawiki xmlns="{ns}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
              f'xsi:schemaLocation="{ns} http://www.mediawiki.org/xml/export-0.11.xsd" version="0.11" '
              f'xml:lang="{site.lang}">'),
             "  <siteinfo>", "    <sitename>Demowiki</sitename>", f"    <dbname>{site.dbname}</dbname>",
             f"    <base>{site.base}</base>",
             "    <generator>MediaWiki 1.46.0-wmf.8</generator>", "    <case>first-letter</case>", "    <namespaces>"]
    for key, name in site.namespaces:
        lines.append(f'      <namespace key="{key}" case="first-letter"' + (f">{name}</namespace>" if name else " />"))
    return "\n".join(lines + ["    </namespaces>", "  </siteinfo>", ""])


def _sha1_base36(text: str) -> str:
    number = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while number:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return digits.rjust(31, "0")


def _page_xml(rng: random.Random, page: _Page, page_id: int, revision: int) -> str:
    sha1 = _sha1_base36(page.text)
    lines = ["  <page>", f"    <title>{_xml(page.title)}</title>", f"    <ns>{page.ns}</ns>", f"    <id>{page_id}</id>"]
    if page.redirect:
        lines.append(f'    <redirect title="{_xml(page.redirect)}" />')
    lines += ["    <revision>", f"      <id>{revision}</id>"]
    if rng.random() < 0.9:
        lines.append(f"      <parentid>{revision - rng.randint(1, 50000)}</parentid>")
    lines += [f"      <timestamp>{TIMESTAMP}</timestamp>", "      <contributor>"]
    if rng.random() < 0.1:
        lines.append(f"        <ip>192.0.2.{rng.randint(1, 254)}</ip>")
    else:
        username, user_id = rng.choice(EDITORS)
        lines += [f"        <username>{_xml(username)}</username>", f"        <id>{user_id}</id>"]
    lines.append("      </contributor>")
    if rng.random() < 0.2:
        lines.append("      <minor />")
    if rng.random() < 0.8:
        lines.append(f"      <comment>{_xml(rng.choice(EDIT_COMMENTS))}</comment>")
    lines += [f"      <origin>{revision}</origin>", "      <model>wikitext</model>",
              "      <format>text/x-wiki</format>",
              f'      <text bytes="{len(page.text.encode("utf-8"))}" sha1="{sha1}" xml:space="preserve">'
              f"{_xml(page.text)}</text>", f"      <sha1>{sha1}</sha1>", "    </revision>", "  </page>", ""]
    return "\n".join(lines)


def _write_multistream(rng: random.Random, pages: list[_Page], dump_path: Path, index_path: Path,
                       site: _Site = ENWIKI) -> None:
    """Write the dump (header stream, one stream per ``site.pages_per_stream`` pages, footer stream) and its index."""
    streams = [bz2.compress(_siteinfo(site).encode("utf-8"))]
    offset = len(streams[0])
    index_lines = []
    page_id, revision = site.first_page_id, site.first_revision
    for start in range(0, len(pages), site.pages_per_stream):
        chunk = []
        for page in pages[start:start + site.pages_per_stream]:
            page_id += rng.randint(1, 6)
            revision += rng.randint(1, 900)
            chunk.append(_page_xml(rng, page, page_id, revision))
            index_lines.append(f"{offset}:{page_id}:{_xml(page.title)}\n")
        streams.append(bz2.compress("".join(chunk).encode("utf-8")))
        offset += len(streams[-1])
    streams.append(bz2.compress(b"</mediawiki>\n"))
    dump_path.write_bytes(b"".join(streams))
    index_path.write_bytes(bz2.compress("".join(index_lines).encode("utf-8")))


# ---------------------------------------------------------------- Wikidata JSON dump


class _Claims:
    """Builds Wikidata statements in the dump's shape, with deterministic ids."""

    def __init__(self, rng: random.Random, qid: str):
        self.rng = rng
        self.qid = qid
        self.claims: dict[str, list] = {}

    def _guid(self) -> str:
        r = self.rng
        return (f"{self.qid}${r.getrandbits(32):08X}-{r.getrandbits(16):04X}-{r.getrandbits(16):04X}-"
                f"{r.getrandbits(16):04X}-{r.getrandbits(48):012X}")

    def add(self, prop: str, snak: dict, rank: str = "normal", qualifiers: dict | None = None) -> None:
        statement = {"mainsnak": snak, "type": "statement"}
        if qualifiers:
            statement["qualifiers"] = qualifiers
            statement["qualifiers-order"] = list(qualifiers)
        statement.update({"id": self._guid(), "rank": rank})
        self.claims.setdefault(prop, []).append(statement)

    def item(self, prop: str, qid: str, rank: str = "normal") -> None:
        self.add(prop, _item_snak(prop, qid), rank)

    def year(self, prop: str, year: int) -> None:
        self.add(prop, _time_snak(prop, year))

    def quantity(self, prop: str, amount: str, year: int | None = None) -> None:
        qualifiers = None
        if year:
            qualifier = _time_snak("P585", year)
            qualifier = {"snaktype": "value", "property": "P585",
                         "hash": hashlib.sha1(json.dumps(qualifier).encode()).hexdigest(),
                         "datavalue": qualifier["datavalue"], "datatype": "time"}
            qualifiers = {"P585": [qualifier]}
        snak = {"snaktype": "value", "property": prop,
                "datavalue": {"value": {"amount": "+" + amount.replace(",", ""), "unit": "1"}, "type": "quantity"},
                "datatype": "quantity"}
        self.add(prop, snak, qualifiers=qualifiers)

    def special(self, prop: str, snaktype: str) -> None:
        self.add(prop, {"snaktype": snaktype, "property": prop, "datatype": "wikibase-item"})


def _item_snak(prop: str, qid: str) -> dict:
    return {"snaktype": "value", "property": prop,
            "datavalue": {"value": {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid},
                          "type": "wikibase-entityid"},
            "datatype": "wikibase-item"}


def _time_snak(prop: str, year: int) -> dict:
    return {"snaktype": "value", "property": prop,
            "datavalue": {"value": {"time": f"+{year}-00-00T00:00:00Z", "timezone": 0, "before": 0, "after": 0,
                                    "precision": 9, "calendarmodel": "http://www.wikidata.org/entity/Q1985727"},
                          "type": "time"},
            "datatype": "time"}


def _terms(values: dict[str, str]) -> dict:
    return {lang: {"language": lang, "value": value} for lang, value in values.items()}


def _item(qid: str, labels: dict, descriptions: dict, aliases: list[str], claims: dict, sitelinks: dict,
          revision: int) -> dict:
    return {"type": "item", "id": qid, "labels": _terms(labels), "descriptions": _terms(descriptions),
            "aliases": {"en": [{"language": "en", "value": a} for a in aliases]} if aliases else {},
            "claims": claims, "sitelinks": sitelinks, "lastrevid": revision, "modified": TIMESTAMP}


def _entity_claims(rng: random.Random, entity: _Entity, edge: dict) -> dict:
    c = _Claims(rng, entity.qid)
    c.item("P31", KIND_TYPE[entity.kind], "preferred" if entity is edge.get("preferred") else "normal")
    if entity is edge.get("deprecated"):
        c.item("P31", COUNTRY, "deprecated")
    if isinstance(entity, _Company):
        c.item("P17", entity.country.qid)
        c.item("P452", entity.industry.qid)
        c.item("P159", entity.city.qid)
        c.year("P571", entity.founded)
        for founder in entity.founders:
            c.item("P112", founder.qid)
        if entity.ceo:
            c.item("P169", entity.ceo.qid)
        elif entity is edge.get("novalue"):
            c.special("P169", "novalue")
        c.quantity("P1128", entity.employees, 2025)
    elif isinstance(entity, _Person):
        c.item("P27", entity.country.qid)
        if entity is edge.get("somevalue"):
            c.special("P19", "somevalue")
        else:
            c.item("P19", entity.birth_city.qid)
        c.year("P569", entity.birth_year)
        if entity.death_year:
            c.year("P570", entity.death_year)
    elif isinstance(entity, _Country):
        c.item("P36", entity.cities[0].qid)
        for neighbour in entity.neighbours:
            c.item("P47", neighbour.qid)
        c.quantity("P1082", str(round(float(entity.population.split()[0]) * 1_000_000)))
    elif isinstance(entity, _City):
        c.item("P17", entity.country.qid)
        c.quantity("P1082", entity.population)
        c.year("P571", entity.founded)
    return c.claims


def _labels(entity: _Entity, de: _DeWiki) -> tuple[dict, dict, list[str]]:
    labels, descriptions, aliases = _english_labels(entity)
    if de.has(entity):
        labels["de"] = de.label(entity)
    return labels, descriptions, aliases


def _english_labels(entity: _Entity) -> tuple[dict, dict, list[str]]:
    if isinstance(entity, _Company):
        return ({"en": entity.title, "de": entity.title},
                {"en": f"{entity.country.demonym} {entity.industry.spec.kind}", "de": "Unternehmen"},
                [entity.short_name] if entity.short_name else [])
    if isinstance(entity, _Person):
        life = f"{entity.birth_year}–{entity.death_year}" if entity.death_year else f"born {entity.birth_year}"
        return ({"en": entity.title, "de": entity.title},
                {"en": f"{entity.country.demonym} {entity.occupation} ({life})", "de": "Person"}, [])
    if isinstance(entity, _Country):
        return ({"en": entity.title, "de": entity.de_label},
                {"en": f"country in {entity.region.removeprefix('the ')}", "de": "Staat"}, [entity.official])
    if isinstance(entity, _City):
        role = "capital" if entity.is_capital else "city"
        return ({"en": entity.title, "de": entity.title},
                {"en": f"{role} of {entity.country.title}", "de": f"Stadt in {entity.country.de_label}"}, [])
    return ({"en": entity.title, "de": entity.spec.de}, {"en": "industry", "de": "Wirtschaftszweig"},
            [entity.spec.sector] if entity.spec.sector != entity.title.lower() else [])


def _sitelinks(entity: _Entity, de: _DeWiki) -> dict:
    links = {}
    if de.has(entity):
        links["dewiki"] = {"site": "dewiki", "title": de.title(entity), "badges": []}
    if entity.has_article:
        links["enwiki"] = {"site": "enwiki", "title": entity.title, "badges": []}
    return links


def _wikidata_entities(rng: random.Random, world: _World, de: _DeWiki) -> list[dict]:
    companies = world.companies
    edge = {"preferred": companies[0], "deprecated": companies[3],
            "novalue": next(c for c in companies if c.ceo is None), "somevalue": world.people[2]}
    revision = 2_400_000_000
    entities = []
    for prop, (label, datatype) in PROPERTIES.items():
        revision += rng.randint(1, 5000)
        entities.append({"type": "property", "datatype": datatype, "id": prop, "labels": _terms({"en": label}),
                         "descriptions": _terms({"en": f"Wikidata property: {label}"}), "aliases": {}, "claims": {},
                         "lastrevid": revision, "modified": TIMESTAMP})
    for qid, (label, description, de_label) in sorted(TYPE_ITEMS.items(), key=lambda kv: int(kv[0][1:])):
        revision += rng.randint(1, 5000)
        entities.append(_item(qid, {"en": label, "de": de_label}, {"en": description}, [], {}, {}, revision))
    for entity in sorted([*world.articles(), *world.ghosts], key=lambda e: int(e.qid[1:])):
        revision += rng.randint(1, 5000)
        labels, descriptions, aliases = _labels(entity, de)
        entities.append(_item(entity.qid, labels, descriptions, aliases, _entity_claims(rng, entity, edge),
                              _sitelinks(entity, de), revision))
    return entities


def _write_wikidata(entities: list[dict], path: Path) -> None:
    lines = ["["] + [json.dumps(e, separators=(",", ":")) + "," for e in entities]
    lines[-1] = lines[-1][:-1]
    path.write_bytes(bz2.compress(("\n".join(lines + ["]"]) + "\n").encode("utf-8")))


# ---------------------------------------------------------------- STS pairs


class _PairMaker:
    """Graded sentence pairs about the world's facts (0 = unrelated, 5 = paraphrase)."""

    def __init__(self, rng: random.Random, world: _World):
        self.rng = rng
        self.world = world
        self.entities = [e for e in world.articles()]
        self.facts = {id(e): _facts(e) for e in self.entities}

    def score(self, base: float, spread: float = 0.2) -> float:
        return min(5.0, max(0.0, base + self.rng.uniform(-spread, spread)))

    def any_fact(self, entity: _Entity | None = None) -> Fact:
        return self.rng.choice(self.facts[id(entity or self.rng.choice(self.entities))])

    def template(self, fact: Fact) -> int:
        return self.rng.randrange(len(TEMPLATES[fact.kind]))

    def paraphrase(self):
        fact = self.any_fact()
        first, second = self.rng.sample(range(len(TEMPLATES[fact.kind])), 2)
        return plain_sentence(fact, first), plain_sentence(fact, second), self.score(4.8)

    def changed_detail(self):
        fact = self.any_fact()
        changed = self.perturb(fact)
        if changed is None:
            return None
        same = self.rng.random() < 0.5
        first = self.template(fact)
        second = first if same else self.template(fact)
        return plain_sentence(fact, first), plain_sentence(changed, second), self.score(3.9 if first == second else 3.6)

    def same_entity(self):
        entity = self.rng.choice(self.entities)
        facts = self.facts[id(entity)]
        first, second = self.rng.sample(facts, 2)
        if first.kind == second.kind:
            return None
        return (plain_sentence(first, self.template(first)), plain_sentence(second, self.template(second)),
                self.score(3.3))

    def shared_traits(self, wanted: str):
        fact = self.any_fact()
        traits = _traits(fact.subject)
        others = [e for e in self.world.of_kind(fact.subject.kind)
                  if e is not fact.subject and _shared(traits, _traits(e)) == wanted]
        candidates = [f for e in others for f in self.facts[id(e)] if f.kind == fact.kind]
        if not candidates:
            return None
        other = self.rng.choice(candidates)
        base = {"both": 2.8, "industry": 2.4, "country": 2.0}[wanted]
        return plain_sentence(fact, self.template(fact)), plain_sentence(other, self.template(other)), self.score(base)

    def unrelated(self):
        fact, other = self.any_fact(), self.any_fact()
        if other.subject is fact.subject or _shared(_traits(fact.subject), _traits(other.subject)) != "none":
            return None
        base = 1.0 if fact.kind == other.kind else 0.3
        return (plain_sentence(fact, self.template(fact)), plain_sentence(other, self.template(other)),
                self.score(base, 0.3))

    def perturb(self, fact: Fact) -> Fact | None:
        slots = dict(fact.slots)
        names = [n for n, v in slots.items() if n in ("year", "p1", "p2", "employees", "population")
                 or (isinstance(v, Ref) and n != "demonym") or (isinstance(v, list) and v and isinstance(v[0], Ref))]
        if not names:
            return None
        name = self.rng.choice(names)
        value = slots[name]
        if name == "year":
            slots[name] = value + self.rng.choice((-1, 1)) * self.rng.randint(3, 25)
        elif name in ("p1", "p2"):
            options = [p for p in fact.subject.industry.spec.products if p not in (slots["p1"], slots["p2"])]
            slots[name] = self.rng.choice(options)
        elif name in ("employees", "population"):
            slots[name] = self._other_number(_plain(value))
        elif isinstance(value, Ref):
            slots[name] = self._other_ref(value)
        else:
            slots[name] = [*value[:-1], self._other_ref(value[-1])]
        return Fact(fact.kind, fact.subject, slots)

    def _other_number(self, text: str) -> str:
        if text.endswith("million"):
            return f"{float(text.split()[0]) * self.rng.uniform(1.5, 3):.1f} million"
        return f"{_round_significant(int(text.replace(',', '')) * self.rng.uniform(1.5, 4), 2):,}"

    def _other_ref(self, ref: Ref) -> Ref:
        pool = [e for e in self.world.of_kind(ref.entity.kind) if e is not ref.entity] if ref.entity.has_article \
            else [p for p in self.world.people]
        return _ref(self.rng.choice(pool))

    def pairs(self, count: int) -> list[tuple[str, str, float]]:
        makers = [self.paraphrase, self.changed_detail, self.same_entity, lambda: self.shared_traits("both"),
                  lambda: self.shared_traits("industry"), lambda: self.shared_traits("country"), self.unrelated]
        weights = [0.2, 0.2, 0.15, 0.1, 0.1, 0.1, 0.15]
        seen, pairs = set(), []
        for _ in range(count * 50):
            if len(pairs) == count:
                break
            pair = self.rng.choices(makers, weights)[0]()
            if pair is None or pair[0] == pair[1]:
                continue
            key = tuple(sorted(pair[:2]))
            if key in seen:
                continue
            seen.add(key)
            pairs.append(pair if self.rng.random() < 0.5 else (pair[1], pair[0], pair[2]))
        return pairs


def _traits(entity: _Entity) -> tuple[set, set]:
    """(countries, industries) an entity belongs to, by qid."""
    if isinstance(entity, _Company):
        return {entity.country.qid}, {entity.industry.qid}
    if isinstance(entity, _Person):
        roles = entity.founded + ([entity.ceo_of] if entity.ceo_of else [])
        return {entity.country.qid}, {c.industry.qid for c in roles}
    if isinstance(entity, _City):
        return {entity.country.qid}, set()
    if isinstance(entity, _Country):
        return {entity.qid}, set()
    return set(), {entity.qid}


def _shared(a: tuple[set, set], b: tuple[set, set]) -> str:
    country, industry = bool(a[0] & b[0]), bool(a[1] & b[1])
    return {(True, True): "both", (True, False): "country", (False, True): "industry"}.get((country, industry), "none")


def _write_sts(rng: random.Random, world: _World, sts_dir: Path, per_split: int) -> dict[str, int]:
    pairs = _PairMaker(rng, world).pairs(2 * per_split)
    half = len(pairs) // 2
    counts = {}
    for split, rows in (("dev", pairs[:half]), ("test", pairs[half:])):
        width = max(4, len(str(len(rows))))
        lines = [f"main-demo\tdemo\t2026\t{i:0{width}d}\t{score:.3f}\t{a}\t{b}\n"
                 for i, (a, b, score) in enumerate(rows)]
        (sts_dir / f"sts-{split}.csv").write_text("".join(lines), encoding="utf-8")
        counts[split] = len(rows)
    return counts


# ---------------------------------------------------------------- NLI pairs

# fact kinds whose perturbed value makes a false statement (a single-valued or
# exhaustive slot); "X includes ..." lists are left out: a changed member is
# not necessarily false
NLI_CONTRADICTABLE = ("company_kind", "founded", "products", "ceo", "employees", "acquired", "person_kind",
                      "born", "founder_of", "ceo_of", "capital", "population", "city_population",
                      "city_founded", "capital_city", "city_kind")
# generalisations of a fact: true whenever the fact is ("{decade}" is the year's decade)
NLI_GENERALISATIONS = {
    "company_kind": ("{s} is a company based in {country}.", "{s} has its head office in {city}."),
    "founded": ("{s} was founded in the {decade}s.", "{s} was founded by {founders}."),
    "products": ("{s} makes {p1}.", "{s} produces {p2}."),
    "ceo": ("{s} is led by {ceo}.", "{s} has had the same chief executive since {year}."),
    "acquired": ("{s} once bought {target}.", "{target} was acquired in the {decade}s."),
    "person_kind": ("{s} is a {occupation}.", "{s} is a citizen of {country}."),
    "born": ("{s} was born in {country}.", "{s} was born in the {decade}s."),
    "founder_of": ("{s} is one of the founders of {company}.", "{s} founded a company in the {decade}s."),
    "ceo_of": ("{s} leads {company}.", "{s} is a chief executive."),
    "capital": ("{capital} is a city in {s}.",),
    "capital_city": ("{s} is a city in {country}.",),
    "city_kind": ("{s} is a city in {country}.",),
    "city_founded": ("{s} was founded in the {decade}s.", "{s} is a city founded in {year}."),
}


def _nli_sentence(fact: Fact, pattern: str) -> str:
    slots = {name: _plain(value) for name, value in fact.slots.items()}
    if "year" in fact.slots:
        slots["decade"] = str(int(fact.slots["year"]) // 10 * 10)
    return _finish(_past_tense_if_dead(fact.subject, pattern.format(s=_subject_text(fact.subject), **slots)))


def _nli_triples(rng: random.Random, world: _World, count: int) -> list[tuple[str, str, str, str]]:
    """``count`` premises, each as (premise, entailment, contradiction, neutral)."""
    maker = _PairMaker(rng, world)
    seen: set[str] = set()
    triples = []
    for _ in range(count * 50):
        if len(triples) == count:
            break
        entity = rng.choice(maker.entities)
        facts = maker.facts[id(entity)]
        fact = rng.choice(facts)
        others = [f for f in facts if f.kind != fact.kind]
        if fact.kind not in NLI_CONTRADICTABLE or not others:
            continue
        wrong = maker.perturb(fact)
        if wrong is None:
            continue
        changed = [name for name in fact.slots if _plain(fact.slots[name]) != _plain(wrong.slots[name])]
        templates = TEMPLATES[fact.kind]
        # the contradiction must state the wrong value: a template that shows a changed slot
        showing = [t for t, text in enumerate(templates) if any("{" + name + "}" in text for name in changed)]
        if not showing:
            continue
        first = maker.template(fact)
        premise = plain_sentence(fact, first)
        if premise in seen:
            continue
        general = NLI_GENERALISATIONS.get(fact.kind, ())
        if general and rng.random() < 0.6:
            entailment = _nli_sentence(fact, rng.choice(general))
        else:
            entailment = plain_sentence(fact, rng.choice([t for t in range(len(templates)) if t != first]))
        contradiction = plain_sentence(wrong, rng.choice(showing))
        neutral_fact = rng.choice(others)
        neutral = plain_sentence(neutral_fact, maker.template(neutral_fact))
        if len({premise, entailment, contradiction, neutral}) < 4:
            continue
        seen.add(premise)
        triples.append((premise, entailment, contradiction, neutral))
    return triples


def _write_nli(rng: random.Random, world: _World, nli_dir: Path, premises: int) -> dict[str, int]:
    """SentEval layout: ``s1.<split>``, ``s2.<split>``, ``labels.<split>``; 80/10/10 by premise."""
    nli_dir.mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[tuple[str, str, str]]] = {"train": [], "dev": [], "test": []}
    for i, (premise, entailment, contradiction, neutral) in enumerate(_nli_triples(rng, world, premises)):
        split = "train" if i % 10 < 8 else ("dev" if i % 10 == 8 else "test")
        rows = [(premise, entailment, "entailment"), (premise, contradiction, "contradiction"),
                (premise, neutral, "neutral")]
        rng.shuffle(rows)
        splits[split].extend(rows)
    for split, rows in splits.items():
        for name, column in (("s1", 0), ("s2", 1), ("labels", 2)):
            (nli_dir / f"{name}.{split}").write_text("".join(row[column] + "\n" for row in rows), encoding="utf-8")
    return {split: len(rows) for split, rows in splits.items()}


# ---------------------------------------------------------------- API


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

    def ground_truth(self) -> dict:
        """The parsed ``world.json``: seed, counts, entities, redirects, special pages, ``dewiki_titles``
        (``{qid: German title}``) and ``dewiki_redirects`` (``{source: target}``)."""
        return json.loads((self.root / WORLD_FILE).read_text(encoding="utf-8"))


def _paths() -> dict[str, str]:
    return {"wikipedia_dump": WIKIPEDIA_DUMP, "wikipedia_index": WIKIPEDIA_INDEX, "wikidata_dump": WIKIDATA_DUMP,
            "dewiki_dump": DEWIKI_DUMP, "dewiki_index": DEWIKI_INDEX, "sts_dir": STS_DIR}


def _entity_record(entity: _Entity) -> dict:
    record = {"title": entity.title, "qid": entity.qid, "type": KIND_TYPE[entity.kind], "kind": entity.kind}
    if isinstance(entity, (_Company, _City)):
        record["country"] = entity.country.qid
    if isinstance(entity, _Company):
        record["industry"] = entity.industry.qid
    if isinstance(entity, _Person):
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
    world = _build_world(rng, scale)
    pages, specials = _pages(rng, world)
    _write_multistream(rng, pages, root / WIKIPEDIA_DUMP, root / WIKIPEDIA_INDEX, ENWIKI)
    # The German wiki has its own generator, so the English dump, STS pairs and statements do not depend on it.
    de_rng = random.Random(f"dewiki-{seed}")
    de = _make_dewiki(de_rng, world, scale)
    de_pages = _dewiki_pages(de_rng, de)
    _write_multistream(de_rng, de_pages, root / DEWIKI_DUMP, root / DEWIKI_INDEX, DEWIKI)
    entities = _wikidata_entities(rng, world, de)
    _write_wikidata(entities, root / WIKIDATA_DUMP)
    sts_counts = _write_sts(rng, world, root / STS_DIR, 150 * scale)
    redirects = sum(1 for p in pages if p.redirect)
    non_articles = sum(1 for p in pages if p.ns != 0)
    articles = world.articles()
    summary = {
        "name": "demowiki", "dump_date": DUMP_DATE, "seed": seed, "scale": scale, "paths": _paths(),
        "counts": {"pages": len(pages), "articles": len(pages) - redirects - non_articles, "redirects": redirects,
                   "non_article_pages": non_articles, "entities": len(entities), "article_entities": len(articles),
                   "sts_dev": sts_counts["dev"], "sts_test": sts_counts["test"],
                   "dewiki_pages": len(de_pages), "dewiki_articles": len(de.entities),
                   "dewiki_redirects": len(de.redirects)},
        "entities": [_entity_record(e) for e in sorted(articles, key=lambda e: int(e.qid[1:]))],
        "entities_without_article": [{"label": g.title, "qid": g.qid, "type": HUMAN} for g in world.ghosts],
        "redirects": dict(sorted(world.redirects.items())),
        "special_pages": specials,
        "dewiki_titles": {e.qid: de.title(e) for e in sorted(de.entities, key=lambda e: int(e.qid[1:]))},
        "dewiki_redirects": dict(sorted(de.redirects.items())),
    }
    (root / WORLD_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    # NLI pairs last, from their own generator: no byte written above depends on them
    _write_nli(random.Random(f"nli-{seed}"), world, root / NLI_DIR, 120 * scale)
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
                     nli_dir=root / NLI_DIR if (root / NLI_DIR).is_dir() else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingest.demo_world",
                                     description="Write the fictional demo world in real dump formats.")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    parser.add_argument("--scale", type=int, default=1, help="multiplies the number of entities")
    args = parser.parse_args(argv)
    world = generate_demo_world(args.out, seed=args.seed, scale=args.scale)
    for name in ("wikipedia_dump", "wikipedia_index", "dewiki_dump", "dewiki_index", "wikidata_dump", "sts_dir",
                 "nli_dir"):
        print(f"{name}: {getattr(world, name)}")
    print(f"num_pages: {world.num_pages}")
    print(f"dewiki_num_pages: {world.dewiki_num_pages}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
