"""The Wikidata JSON dump writer: the world's items and properties, one entity per line inside ``[`` … ``]``.

Items carry the claims matching the articles (P31, P17, P452, P112, P169, P27,
…) with a few edge cases: ``novalue``/``somevalue`` snaks, a deprecated P31,
items without an ``enwiki`` sitelink, property entities. ``dewiki`` sitelinks
and ``de`` labels come from the German wiki.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import random
from pathlib import Path

from structcse.demo.dewiki import DeWiki
from structcse.demo.world import TIMESTAMP, City, Company, Country, Entity, Person, World


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


def _entity_claims(rng: random.Random, entity: Entity, edge: dict) -> dict:
    c = _Claims(rng, entity.qid)
    c.item("P31", KIND_TYPE[entity.kind], "preferred" if entity is edge.get("preferred") else "normal")
    if entity is edge.get("deprecated"):
        c.item("P31", COUNTRY, "deprecated")
    if isinstance(entity, Company):
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
    elif isinstance(entity, Person):
        c.item("P27", entity.country.qid)
        if entity is edge.get("somevalue"):
            c.special("P19", "somevalue")
        else:
            c.item("P19", entity.birth_city.qid)
        c.year("P569", entity.birth_year)
        if entity.death_year:
            c.year("P570", entity.death_year)
    elif isinstance(entity, Country):
        c.item("P36", entity.cities[0].qid)
        for neighbour in entity.neighbours:
            c.item("P47", neighbour.qid)
        c.quantity("P1082", str(round(float(entity.population.split()[0]) * 1_000_000)))
    elif isinstance(entity, City):
        c.item("P17", entity.country.qid)
        c.quantity("P1082", entity.population)
        c.year("P571", entity.founded)
    return c.claims


def _labels(entity: Entity, de: DeWiki) -> tuple[dict, dict, list[str]]:
    labels, descriptions, aliases = _english_labels(entity)
    if de.has(entity):
        labels["de"] = de.label(entity)
    return labels, descriptions, aliases


def _english_labels(entity: Entity) -> tuple[dict, dict, list[str]]:
    if isinstance(entity, Company):
        return ({"en": entity.title, "de": entity.title},
                {"en": f"{entity.country.demonym} {entity.industry.spec.kind}", "de": "Unternehmen"},
                [entity.short_name] if entity.short_name else [])
    if isinstance(entity, Person):
        life = f"{entity.birth_year}–{entity.death_year}" if entity.death_year else f"born {entity.birth_year}"
        return ({"en": entity.title, "de": entity.title},
                {"en": f"{entity.country.demonym} {entity.occupation} ({life})", "de": "Person"}, [])
    if isinstance(entity, Country):
        return ({"en": entity.title, "de": entity.de_label},
                {"en": f"country in {entity.region.removeprefix('the ')}", "de": "Staat"}, [entity.official])
    if isinstance(entity, City):
        role = "capital" if entity.is_capital else "city"
        return ({"en": entity.title, "de": entity.title},
                {"en": f"{role} of {entity.country.title}", "de": f"Stadt in {entity.country.de_label}"}, [])
    return ({"en": entity.title, "de": entity.spec.de}, {"en": "industry", "de": "Wirtschaftszweig"},
            [entity.spec.sector] if entity.spec.sector != entity.title.lower() else [])


def _sitelinks(entity: Entity, de: DeWiki) -> dict:
    links = {}
    if de.has(entity):
        links["dewiki"] = {"site": "dewiki", "title": de.title(entity), "badges": []}
    if entity.has_article:
        links["enwiki"] = {"site": "enwiki", "title": entity.title, "badges": []}
    return links


def wikidata_entities(rng: random.Random, world: World, de: DeWiki) -> list[dict]:
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


def write_wikidata(entities: list[dict], path: Path) -> None:
    lines = ["["] + [json.dumps(e, separators=(",", ":")) + "," for e in entities]
    lines[-1] = lines[-1][:-1]
    path.write_bytes(bz2.compress(("\n".join(lines + ["]"]) + "\n").encode("utf-8")))
