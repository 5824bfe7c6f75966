"""The German wiki: short template-written German articles about a subset of the world, and redirects.

Drawn with its own random generator, so nothing of the English wiki depends on
it; every sentence is at least 30 characters long and links to another German
article, some through redirects.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from structcse.demo.articles import render_infobox, render_page, slug
from structcse.demo.multistream import Page
from structcse.demo.vocab import OFFICIAL_FORMS
from structcse.demo.world import City, Company, Country, Entity, Industry, Person, World


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
class DeWiki:
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


def _dewiki_subset(world: World, scale: int) -> list:
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


def make_dewiki(rng: random.Random, world: World, scale: int) -> DeWiki:
    entities = _dewiki_subset(world, scale)
    taken: set[str] = set()
    titles, labels, official = {}, {}, {}

    def claim(title: str, qualifier: str) -> str:
        if title.casefold() in taken:
            title += qualifier
        taken.add(title.casefold())
        return title

    for entity in entities:
        if isinstance(entity, Country):
            title = claim(entity.de_label, " (Staat)")
        elif isinstance(entity, City):
            title = claim(_de_city_name(rng, entity.title), " (Stadt)")
        elif isinstance(entity, Industry):
            title = claim(entity.spec.de, " (Wirtschaftszweig)")
        elif isinstance(entity, Company):
            title = claim(_de_company_name(rng, entity.title), COMPANY_QUALIFIER_DE)
        else:
            title = claim(entity.title, " (Unternehmer)")
        titles[id(entity)] = title
        labels[id(entity)] = entity.de_label if isinstance(entity, Country) else re.sub(r" \([^()]*\)$", "", title)
    companies = [e for e in entities if isinstance(e, Company)]
    if all(titles[id(c)] == c.title for c in companies):  # at least one company title differs, whatever the seed
        titles[id(companies[0])] = claim(companies[0].title + COMPANY_QUALIFIER_DE, "")
    redirects = {}
    for entity in entities:
        title = titles[id(entity)]
        if isinstance(entity, Country):
            form = next(f for f in OFFICIAL_FORMS if f.format(entity.title) == entity.official)
            source = OFFICIAL_FORMS_DE[form].format(labels[id(entity)])
            official[id(entity)] = source
        elif isinstance(entity, (City, Company)) and title != entity.title:
            source = entity.title  # the English name
        else:
            continue
        if source.casefold() not in taken:
            taken.add(source.casefold())
            redirects[source] = title
    return DeWiki(entities, titles, labels, redirects, {k: v for k, v in official.items() if v in redirects})


class _DeWriter:
    """Writes the German articles: every sentence links to another German article."""

    def __init__(self, rng: random.Random, de: DeWiki):
        self.rng = rng
        self.de = de
        self.aliases: dict[str, list[str]] = {}
        for source, target in sorted(de.redirects.items()):
            self.aliases.setdefault(target, []).append(source)

    def link(self, entity: Entity, text: str | None = None) -> str:
        title = self.de.title(entity)
        text = self.de.label(entity) if text is None else text
        if title in self.aliases and self.rng.random() < 0.2:
            alias = self.rng.choice(self.aliases[title])
            return f"[[{alias}]]" if alias == text else f"[[{alias}|{text}]]"
        return f"[[{title}]]" if text == title else f"[[{title}|{text}]]"

    def via_official_name(self, country: Country) -> str:
        """A link through the redirect from the country's German official name."""
        source = self.de.official.get(id(country))
        return f"[[{source}|{self.de.label(country)}]]" if source else self.link(country)

    def links(self, entities: list) -> str:
        return _de_join([self.link(e) for e in entities])

    def cite(self, entity: Entity) -> str:
        return (f"<ref>{{{{Internetquelle |url=https://www.{slug(entity.title)}.example/ueber-uns "
                f"|titel={self.de.label(entity)}: Über uns |abruf=2026-01-01}}}}</ref>")

    def article(self, entity: Entity) -> str:
        return {"company": self.company, "person": self.person, "country": self.country,
                "city": self.city, "industry": self.industry}[entity.kind](entity)

    def country(self, c: Country) -> str:
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
        infobox = render_infobox("Infobox Staat", [("DEUTSCHER-NAME", name), ("AMTLICHER-NAME", official),
                                             ("HAUPTSTADT", self.link(capital)),
                                             ("EINWOHNERZAHL", _de_number(c.population))])
        sections = [("Wirtschaft und Städte", [" ".join(economy)])]
        return render_page([infobox, " ".join(lead)], sections, [f"[[Kategorie:Staat {REGIONS_DE[c.region]}]]"])

    def city(self, c: City) -> str:
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
        return render_page([" ".join(lead)], [("Geschichte und Wirtschaft", [" ".join(history)])],
                       [f"[[Kategorie:Ort in {country}]]"])

    def industry(self, i: Industry) -> str:
        companies = [x for x in i.companies if self.de.has(x)]
        countries = []
        for company in companies:
            if company.country not in countries:
                countries.append(company.country)
        lead = (f"'''{self.de.label(i)}''' ist ein Wirtschaftszweig, der besonders in "
                f"{self.links(countries[:2])} eine große Rolle spielt.")
        verb = "gehört" if len(companies[:3]) == 1 else "gehören"
        body = f"Zu den bekannten Unternehmen der Branche {verb} {self.links(companies[:3])}."
        return render_page([lead], [("Unternehmen", [body])], ["[[Kategorie:Wirtschaftszweig]]"])

    def company(self, c: Company) -> str:
        name = self.de.label(c)
        founders = [self.link(p) if self.de.has(p) else p.title for p in c.founders]
        infobox = render_infobox("Infobox Unternehmen", [
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
        return render_page([infobox, " ".join(lead)], sections, categories)

    def person(self, p: Person) -> str:
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
        return render_page([lead], [("Leben", [" ".join(career)])], [t for t in tail if t])


def _de_redirect_text(rng: random.Random, target: str) -> str:
    keyword = "#REDIRECT" if rng.random() < 0.2 else "#WEITERLEITUNG"
    return f"{keyword} [[{target}]]"


def dewiki_pages(rng: random.Random, de: DeWiki) -> list[Page]:
    writer = _DeWriter(rng, de)
    pages = [Page(de.title(e), 0, writer.article(e), None) for e in de.entities]
    pages += [Page(source, 0, _de_redirect_text(rng, target), target) for source, target in de.redirects.items()]
    rng.shuffle(pages)
    return pages
