"""Facts about the world's entities and the sentence templates that state them.

English articles (:mod:`structcse.demo.articles`) and the STS and NLI pairs
(:mod:`structcse.demo.pairs`) are written from the same facts and templates,
so the pairs share the articles' vocabulary.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from structcse.demo.world import City, Company, Country, Entity, Industry, Person


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


class Ref(NamedTuple):
    """A mention of an entity: linked in articles, plain text in STS pairs."""

    entity: Entity
    text: str


class Text(NamedTuple):
    """A value written one way in plain sentences and another in wikitext."""

    plain: str
    wiki: str


class Fact(NamedTuple):
    kind: str
    subject: Entity
    slots: dict


def mention(entity: Entity, text: str | None = None) -> Ref:
    return Ref(entity, entity.title if text is None else text)


def join_words(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def plain_text(value) -> str:
    if isinstance(value, Ref):
        return value.text
    if isinstance(value, Text):
        return value.plain
    if isinstance(value, list):
        return join_words([plain_text(v) for v in value])
    return str(value)


_AN = re.compile(r"\b([Aa]) (?=\[\[[^\]|]*\|[aeiouAEIOU]|\[\[[aeiouAEIOU][^\]|]*\]\]|[aeiouAEIOU])")


def finish_sentence(sentence: str) -> str:
    sentence = _AN.sub(lambda m: m.group(1) + "n ", sentence)
    return sentence[0].upper() + sentence[1:] if sentence[:1].islower() else sentence


def _company_facts(c: Company) -> list[Fact]:
    spec = c.industry.spec
    kind = Text(spec.kind, spec.kind_wiki)
    facts = [
        Fact("company_kind", c, {"kind": kind, "city": mention(c.city), "country": mention(c.country),
                                 "demonym": mention(c.country, c.country.demonym)}),
        Fact("founded", c, {"year": c.founded, "founders": [mention(p) for p in c.founders]}),
        Fact("products", c, {"p1": c.products[0], "p2": c.products[1]}),
        Fact("employees", c, {"employees": c.employees}),
    ]
    if c.ceo:
        facts.append(Fact("ceo", c, {"ceo": mention(c.ceo), "year": c.ceo_since}))
    if c.rivals:
        facts.append(Fact("rivals", c, {"rivals": [mention(r) for r in c.rivals], "market": spec.market}))
    if c.acquired:
        facts.append(Fact("acquired", c, {"target": mention(c.acquired[0]), "year": c.acquired[1]}))
    return facts


def _person_facts(p: Person) -> list[Fact]:
    facts = [
        Fact("person_kind", p, {"demonym": mention(p.country, p.country.demonym),
                                "occupation": Text(p.occupation, f"[[{p.occupation}]]"),
                                "country": mention(p.country)}),
        Fact("born", p, {"city": mention(p.birth_city), "country": mention(p.country), "year": p.birth_year,
                         "demonym": mention(p.country, p.country.demonym)}),
        Fact("studied", p, {"subject": p.subject, "university": f"University of {p.university_city.title}"}),
    ]
    facts += [Fact("founder_of", p, {"company": mention(c), "year": c.founded}) for c in p.founded]
    if p.ceo_of:
        facts.append(Fact("ceo_of", p, {"company": mention(p.ceo_of), "year": p.ceo_of.ceo_since}))
    return facts


def _country_facts(c: Country) -> list[Fact]:
    facts = [
        Fact("country_kind", c, {"official": Text(c.official, f"'''{c.official}'''"), "region": c.region}),
        Fact("capital", c, {"capital": mention(c.cities[0])}),
        Fact("population", c, {"population": Text(c.population, c.population.replace(" ", "&nbsp;"))}),
        Fact("currency", c, {"currency": c.currency}),
    ]
    if c.neighbours:
        facts.append(Fact("borders", c, {"neighbours": [mention(n) for n in c.neighbours]}))
    sectors = _top_industries(c.companies)
    if sectors:
        facts.append(Fact("economy", c, {"sectors": [mention(i, i.spec.sector) for i in sectors]}))
    if c.companies:
        facts.append(Fact("major_companies", c, {"companies": [mention(x) for x in c.companies[:3]]}))
    return facts


def _top_industries(companies: list[Company]) -> list[Industry]:
    counts: dict[int, list] = {}
    for company in companies:
        counts.setdefault(id(company.industry), [company.industry, 0])[1] += 1
    ranked = sorted(counts.values(), key=lambda pair: (-pair[1], pair[0].title))
    return [industry for industry, _ in ranked[:3]]


def _city_facts(c: City) -> list[Fact]:
    facts = [
        Fact("city_kind", c, {"adjective": c.adjective, "country": mention(c.country)}),
        Fact("city_population", c, {"population": c.population}),
        Fact("city_founded", c, {"year": c.founded}),
    ]
    if c.is_capital:
        facts.append(Fact("capital_city", c, {"country": mention(c.country)}))
    if c.companies:
        facts.append(Fact("hq_of", c, {"companies": [mention(x) for x in c.companies[:3]]}))
    return facts


def _industry_facts(i: Industry) -> list[Fact]:
    facts = [Fact("industry_kind", i, {"products": join_words(list(i.spec.products[:3]))})]
    if i.companies:
        facts.append(Fact("industry_leaders", i, {"companies": [mention(x) for x in i.companies[:3]]}))
        countries = []
        for company in i.companies:
            if company.country not in countries:
                countries.append(company.country)
        facts.append(Fact("industry_countries", i, {"countries": [mention(x) for x in countries[:2]]}))
    return facts


def entity_facts(entity: Entity) -> list[Fact]:
    return {"company": _company_facts, "person": _person_facts, "country": _country_facts,
            "city": _city_facts, "industry": _industry_facts}[entity.kind](entity)


def subject_text(entity: Entity) -> str:
    return entity.spec.sector if isinstance(entity, Industry) else entity.title


def plain_sentence(fact: Fact, template: int) -> str:
    """The fact written with template number ``template``, in plain text."""
    slots = {name: plain_text(value) for name, value in fact.slots.items()}
    sentence = TEMPLATES[fact.kind][template].format(s=subject_text(fact.subject), **slots)
    return finish_sentence(past_tense_if_dead(fact.subject, sentence))


def past_tense_if_dead(subject: Entity, sentence: str) -> str:
    if isinstance(subject, Person) and subject.death_year:
        return sentence.replace(" is a ", " was a ", 1).replace(" is the founder", " was the founder", 1)
    return sentence
