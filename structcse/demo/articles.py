"""The English wiki: articles in real wikitext, redirects and non-article pages.

Articles have infoboxes with nested templates, refs, tables, files, comments,
categories, link trails and links through redirects; a few pages are
deliberately broken (unclosed markup, a near-empty stub).
"""

from __future__ import annotations

import random
import re
import unicodedata

from structcse.demo.facts import (TEMPLATES, Fact, Ref, Text, entity_facts, finish_sentence, join_words, mention,
                                  past_tense_if_dead)
from structcse.demo.multistream import Page
from structcse.demo.world import City, Company, Country, Entity, Industry, Person, World


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
        if roll < 0.08 and isinstance(ref.entity, Company):
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
            return join_words([self.value(v) for v in value])
        return str(value)

    def sentence(self, fact: Fact, subject: str | None = None, lead: bool = False) -> str:
        templates = TEMPLATES[fact.kind]
        choices = [t for t in templates if t.startswith("{s}")] if lead else list(templates)
        template = self.rng.choice(choices or templates)
        slots = {name: self.value(value) for name, value in fact.slots.items()}
        sentence = template.format(s=subject or self.subject(fact.subject, template), **slots)
        return finish_sentence(past_tense_if_dead(fact.subject, sentence))

    def subject(self, entity: Entity, template: str) -> str:
        if isinstance(entity, Industry):
            return entity.spec.sector
        if isinstance(entity, Person):
            return self.rng.choice([entity.surname, "she" if entity.female else "he"])
        if "city of {s}" in template or self.rng.random() < 0.6:
            return entity.title
        return f"the {entity.kind}"

    def cite(self, entity: Entity, name: str | None = None) -> str:
        site = slug(entity.title)
        page = self.rng.choice(("about", "history", "news/annual-report", "press"))
        body = (f"{{{{cite web |url=https://www.{site}.example/{page} |title={entity.title}: "
                f"{page.split('/')[-1].replace('-', ' ')} |website={entity.title} |access-date=1 January 2026}}}}")
        return f'<ref name="{name}">{body}</ref>' if name else f"<ref>{body}</ref>"

    def news_cite(self, city: City, year: int) -> str:
        return (f"<ref>{{{{cite news |url=https://herald.{slug(city.title)}.example/{year} "
                f"|title=Business pages |work=''The {city.title} Herald'' |date=12 March {year}}}}}</ref>")

    def paragraph(self, sentences: list[str]) -> str:
        return " ".join(s for s in sentences if s)


def slug(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")


def render_infobox(name: str, fields: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in fields)
    rows = [f"| {key.ljust(width)} = {value}" for key, value in fields if value]
    return "{{" + name + "\n" + "\n".join(rows) + "\n}}"


def render_page(head: list[str], sections: list[tuple[str, list[str]]], tail: list[str]) -> str:
    """Wikitext page: head lines (hatnotes, infobox, lead), ``== sections ==``, then tail lines (categories)."""
    blocks = ["\n".join(line for line in head if line)]
    blocks += [f"== {title} ==\n" + "\n\n".join(b for b in body if b) for title, body in sections if any(body)]
    blocks.append("\n".join(tail))
    return "\n\n".join(blocks)


def _company_article(c: Company, w: _Writer) -> str:
    facts = {f.kind: f for f in entity_facts(c)}
    rng = w.rng
    founders = "<br />".join(w.value(mention(p)) for p in c.founders)
    infobox = render_infobox("Infobox company", [
        ("name", c.title), ("logo", f"{c.title} logo.svg"),
        ("type", rng.choice(("[[Public company|Public]]", "[[Privately held company|Private]]"))),
        ("industry", f"[[{c.industry.title}]]"), ("founded", f"{{{{start date and age|{c.founded}}}}}"),
        ("founders", founders), ("hq_location_city", w.value(mention(c.city))),
        ("hq_location_country", f"{{{{flag|{c.country.title}}}}}"),
        ("key_people", f"{w.value(mention(c.ceo))} ([[Chief executive officer|CEO]])" if c.ceo else ""),
        ("products", "{{hlist|" + "|".join(p.capitalize() for p in c.products) + "}}"),
        ("num_employees", c.employees), ("num_employees_year", "2025"),
        ("website", f"{{{{URL|https://www.{slug(c.title)}.example}}}}"),
    ])
    lead = w.paragraph([w.sentence(facts["company_kind"], f"'''{c.title}'''", lead=True) + w.cite(c, "profile"),
                        w.sentence(facts["products"])])
    history = [w.sentence(facts["founded"]) + w.news_cite(c.city, c.founded + 1)]
    if "acquired" in facts:
        history.append(w.sentence(facts["acquired"]))
    decade = (min(c.founded + rng.randint(5, 20), 2015) // 10) * 10
    history.append(f"According to ''The {c.city.title} Herald'', the company's sales of {c.products[0]} "
                   f"grew quickly during the {decade}s.")
    picture = (f"[[File:{c.title.replace(':', ' ')} headquarters.jpg|thumb|The headquarters of {w.value(mention(c))} "
               f"in {w.value(mention(c.city))}]]")
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
        ("External links", [f"* {{{{Official website|https://www.{slug(c.title)}.example}}}}"]),
    ]
    categories = [f"[[Category:{c.industry.spec.sector.capitalize()} companies]]",
                  f"[[Category:Companies of {c.country.title}]]", f"[[Category:Companies established in {c.founded}]]"]
    if rng.random() < 0.1:
        categories.append(f"[[de:{c.title}]]")
    head = ["{{Short description|" + f"{c.country.demonym} {c.industry.spec.kind}" + "}}",
            "{{Use dmy dates|date=January 2026}}", infobox, lead]
    return render_page(head, sections, categories)


def _key_figures_table(rng: random.Random, c: Company) -> str:
    header = f"! Year !! Revenue (million {c.country.currency}s) !! Employees"
    rows = ['{| class="wikitable"', "|+ Key figures", header]
    employees = int(c.employees.replace(",", ""))
    for year in (2023, 2024, 2025):
        revenue = max(1, int(employees * rng.uniform(0.05, 0.4)))
        rows += ["|-", f"| {year} || {revenue:,} || {int(employees * rng.uniform(0.9, 1.0)):,}"]
    return "\n".join(rows + ["|}"])


def _person_article(p: Person, w: _Writer) -> str:
    facts = entity_facts(p)
    by_kind = {f.kind: f for f in facts}
    life = f"{p.birth_year}–{p.death_year}" if p.death_year else f"born {p.birth_year}"
    birth_date = f"{{{{birth year|{p.birth_year}}}}}" if p.death_year else f"{{{{birth year and age|{p.birth_year}}}}}"
    infobox = render_infobox("Infobox person", [
        ("name", p.title), ("image", f"{p.title} 2019.jpg"), ("birth_date", birth_date),
        ("birth_place", f"{w.value(mention(p.birth_city))}, {w.value(mention(p.country))}"),
        ("death_date", f"{{{{death year and age|{p.death_year}|{p.birth_year}}}}}" if p.death_year else ""),
        ("nationality", w.value(mention(p.country, p.country.demonym))),
        ("occupation", p.occupation.capitalize()),
        ("known_for", "Founding " + w.value(mention(p.founded[0])) if p.founded else ""),
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
    return render_page(head, sections, tail)


def _country_article(c: Country, w: _Writer) -> str:
    facts = {f.kind: f for f in entity_facts(c)}
    region = c.region.removeprefix("the ")
    infobox = render_infobox("Infobox country", [
        ("conventional_long_name", c.official), ("common_name", c.title),
        ("capital", w.value(mention(c.cities[0]))), ("largest_city", "capital"), ("demonym", c.demonym),
        ("population_estimate", "{{circa}} " + c.population), ("currency", c.currency),
    ])
    lead = [w.sentence(facts["country_kind"], f"'''{c.title}'''", lead=True), w.sentence(facts["capital"]),
            w.sentence(facts["population"]) + w.cite(c, "census")]
    if "borders" in facts:
        lead.insert(1, w.sentence(facts["borders"]))
    economy = [w.sentence(facts[k]) for k in ("economy", "major_companies") if k in facts]
    economy.append(w.sentence(facts["currency"]) + '<ref name="census" />')
    cities = "\n".join(f"* {w.value(mention(city))}" + (" (capital)" if city.is_capital else "") for city in c.cities)
    sections = [("Economy", [w.paragraph(economy)]), ("Cities", [cities]), ("References", ["{{Reflist}}"])]
    head = ["{{Short description|Country in " + region + "}}", infobox, w.paragraph(lead)]
    return render_page(head, sections, [f"[[Category:Countries in {region}]]"])


def _city_article(c: City, w: _Writer) -> str:
    facts = {f.kind: f for f in entity_facts(c)}
    infobox = render_infobox("Infobox settlement", [
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
    return render_page([infobox, w.paragraph(lead)], sections, [f"[[Category:Cities in {c.country.title}]]"])


def _industry_article(i: Industry, w: _Writer) -> str:
    facts = {f.kind: f for f in entity_facts(i)}
    head = ["{{Short description|Industry}}",
            "{{About|the industry|the list of companies|" + f"[[:Category:{i.title} companies]]" + "}}",
            w.sentence(facts["industry_kind"], f"'''{i.title}'''", lead=True)]
    companies = [w.paragraph([w.sentence(facts[k]) for k in ("industry_leaders", "industry_countries")])] \
        if "industry_leaders" in facts else []
    sections = [("Companies", companies),
                ("See also", [f"* [[:Category:{i.title} companies|List of {i.spec.sector} companies]]"])]
    return render_page(head, sections, ["[[Category:Industries]]"])


def _article(entity: Entity, w: _Writer) -> str:
    return {"company": _company_article, "person": _person_article, "country": _country_article,
            "city": _city_article, "industry": _industry_article}[entity.kind](entity, w)


def _break_markup(text: str, kind: str) -> str:
    """Damage a page the way careless edits do: an unclosed ``{{`` or ``[[``."""
    marker = "== History ==" if kind == "company" else "== Early life =="
    broken = ("{{cite web |url=https://archive.example/report |title=Annual report"
              if kind == "company" else "The family later moved to [[Riverside and opened a bakery.")
    return text.replace(marker, marker + "\n" + broken, 1)


def _stub_article(p: Person) -> str:
    return ("{{Short description|" + f"{p.country.demonym} businessperson" + "}}\n"
            f"'''{p.title}'''\n\n{{{{{p.country.title}-business-bio-stub}}}}\n[[Category:Living people]]")


def _redirect_text(rng: random.Random, target: str, reason: str) -> str:
    keyword = "#redirect" if rng.random() < 0.1 else "#REDIRECT"
    return f"{keyword} [[{target}]]\n\n{{{{Redirect category shell|\n{{{{{reason}}}}}\n}}}}"


def _non_article_pages(world: World) -> list[tuple[str, int, str]]:
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


def article_pages(rng: random.Random, world: World) -> tuple[list[Page], dict]:
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
        pages.append(Page(entity.title, 0, text, None))
    reasons = {**{c.title: "R from long name" for c in world.countries},
               **{p.title: "R from alternative name" for p in world.people}}
    for source, target in world.redirects.items():
        reason = reasons.get(target, "R from short name")
        pages.append(Page(source, 0, _redirect_text(rng, target, reason), target))
    non_articles = _non_article_pages(world)
    pages += [Page(title, ns, text, None) for title, ns, text in non_articles]
    specials["non_article"] = [title for title, _, _ in non_articles]
    rng.shuffle(pages)
    return pages, specials
