"""The world model: countries, cities, industries, companies and people, and how they are drawn.

``build_world(rng, scale)`` draws the whole world from ``rng``: fresh fictional
names (unique across the world, case-insensitive), the relations between
entities (capitals, headquarters, founders, chief executives, rivals,
acquisitions), redirects and QIDs. Everything else is written from it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from structcse.demo.vocab import (CITY_ADJECTIVES, CITY_ENDINGS, COMPANY_GROUP_WORDS, COUNTRY_ENDINGS, CURRENCIES,
                                  FEMALE_NAMES, INDUSTRIES, MALE_NAMES, OCCUPATIONS, OFFICIAL_FORMS, REGIONS,
                                  SUBJECTS, SURNAME_ENDINGS, SYLLABLES, IndustrySpec)

# the day the world is seen: every dump of it is dated then
DUMP_DATE = "20260101"
TIMESTAMP = "2026-01-01T00:00:00Z"


@dataclass(eq=False)
class Entity:
    title: str
    qid: str = ""
    has_article: bool = True

    kind = ""


@dataclass(eq=False)
class Country(Entity):
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
class City(Entity):
    country: Country | None = None
    population: str = ""
    founded: int = 0
    adjective: str = ""
    is_capital: bool = False
    companies: list = field(default_factory=list)
    kind = "city"


@dataclass(eq=False)
class Industry(Entity):
    spec: IndustrySpec | None = None
    companies: list = field(default_factory=list)
    kind = "industry"


@dataclass(eq=False)
class Person(Entity):
    first: str = ""
    surname: str = ""
    female: bool = False
    country: Country | None = None
    birth_city: City | None = None
    birth_year: int = 0
    death_year: int = 0
    occupation: str = ""
    subject: str = ""
    university_city: City | None = None
    founded: list = field(default_factory=list)
    ceo_of: object = None
    kind = "person"


@dataclass(eq=False)
class Company(Entity):
    country: Country | None = None
    city: City | None = None
    industry: Industry | None = None
    founded: int = 0
    products: tuple = ()
    employees: str = ""
    founders: list = field(default_factory=list)
    ceo: Person | None = None
    ceo_since: int = 0
    rivals: list = field(default_factory=list)
    acquired: tuple | None = None
    short_name: str = ""
    kind = "company"


@dataclass
class World:
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


def round_significant(value: float, digits: int) -> int:
    return int(float(f"{value:.{digits}g}"))


def _make_countries(rng: random.Random, names: _Names, count: int) -> list[Country]:
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
        countries.append(Country(
            title=title, official=official, demonym=demonym,
            de_label=title[: len(title) - len(ending)] + de_ending, region=rng.choice(REGIONS),
            currency=f"{demonym} {rng.choice(CURRENCIES)}", population=f"{rng.uniform(0.8, 40):.1f} million"))
    for country in countries:
        for neighbour in rng.sample(countries, min(len(countries), rng.randint(1, 3))):
            if neighbour is not country and neighbour not in country.neighbours:
                country.neighbours.append(neighbour)
                neighbour.neighbours.append(country)
    return countries


def _make_cities(rng: random.Random, names: _Names, countries: list[Country]) -> list[City]:
    cities = []
    for country in countries:
        for number in range(1 if rng.random() < 0.5 else 2):
            title = names.unique(lambda: names.stem() + rng.choice(CITY_ENDINGS))
            exponent = rng.uniform(5.3, 6.3) if number == 0 else rng.uniform(4.3, 5.5)
            population = round_significant(10**exponent, 3)
            city = City(title=title, country=country, population=f"{population:,}", founded=rng.randint(900, 1800),
                         adjective=rng.choice(CITY_ADJECTIVES), is_capital=number == 0)
            country.cities.append(city)
            cities.append(city)
    return cities


def _make_people(rng: random.Random, names: _Names, countries: list[Country], count: int,
                 with_article: bool = True) -> list[Person]:
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
        people.append(Person(
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


def _make_companies(rng: random.Random, countries, industries, people, ghosts, count) -> list[Company]:
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
        employees = round_significant(10 ** rng.uniform(1.7, 5), 2)
        companies.append(Company(
            title="", country=country, city=rng.choice(country.cities), industry=industry,
            founded=rng.randint(1965, 2020), products=tuple(rng.sample(industry.spec.products, 2)),
            employees=f"{employees:,}", founders=founders))
    for ghost, company in zip(ghosts, rng.sample(companies, len(ghosts))):
        company.founders.append(ghost)
    return companies


def _name_companies(rng: random.Random, names: _Names, companies: list[Company]) -> None:
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


def _give_special_names(rng: random.Random, names: _Names, companies: list[Company]) -> None:
    """One title with "&" and one with ":", to exercise escaping and index parsing."""
    plain = [c for c in companies if not c.short_name]
    with_amp, with_colon = plain[0], plain[1]
    surnames = [p.surname for p in with_amp.founders if p.has_article]
    partner = names.stem(2) + rng.choice(SURNAME_ENDINGS)
    with_amp.title = names.unique(lambda: f"{surnames[0] if surnames else names.stem()} & {partner}")
    suffix = rng.choice(with_colon.industry.spec.suffixes)
    with_colon.title = names.unique(lambda: f"{names.stem()}:{suffix}")


def _assign_roles(rng: random.Random, companies: list[Company], people: list[Person],
                  ghosts: list[Person]) -> None:
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


def _make_redirects(rng: random.Random, names: _Names, world: World) -> dict[str, str]:
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


def build_world(rng: random.Random, scale: int) -> World:
    names = _Names(rng)
    countries = _make_countries(rng, names, 20 * scale)
    cities = _make_cities(rng, names, countries)
    industries = []
    for spec in INDUSTRIES[: min(len(INDUSTRIES), 12 * scale)]:
        names.claim(spec.title)
        industries.append(Industry(title=spec.title, spec=spec))
    people = _make_people(rng, names, countries, 80 * scale)
    ghosts = _make_people(rng, names, countries, 2 * scale, with_article=False)
    companies = _make_companies(rng, countries, industries, people, ghosts, 150 * scale)
    _name_companies(rng, names, companies)
    for company in companies:
        company.country.companies.append(company)
        company.city.companies.append(company)
        company.industry.companies.append(company)
    _assign_roles(rng, companies, people, ghosts)
    world = World(countries, cities, industries, companies, people, ghosts, {})
    world.redirects = _make_redirects(rng, names, world)
    _assign_qids(rng, [*world.articles(), *ghosts])
    return world
