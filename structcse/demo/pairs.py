"""The pair corpora: graded STS pairs and NLI triplets stated from the world's facts.

STS pairs go to ``sts/sts-{dev,test}.csv`` in the STS-Benchmark layout; NLI
pairs to ``nli/{s1,s2,labels}.{train,dev,test}`` in SentEval's layout.
"""

from __future__ import annotations

import random
from pathlib import Path

from structcse.demo.facts import (TEMPLATES, Fact, Ref, entity_facts, finish_sentence, mention, past_tense_if_dead,
                                  plain_sentence, plain_text, subject_text)
from structcse.demo.world import City, Company, Country, Entity, Person, World, round_significant


class _PairMaker:
    """Graded sentence pairs about the world's facts (0 = unrelated, 5 = paraphrase)."""

    def __init__(self, rng: random.Random, world: World):
        self.rng = rng
        self.world = world
        self.entities = [e for e in world.articles()]
        self.facts = {id(e): entity_facts(e) for e in self.entities}

    def score(self, base: float, spread: float = 0.2) -> float:
        return min(5.0, max(0.0, base + self.rng.uniform(-spread, spread)))

    def any_fact(self, entity: Entity | None = None) -> Fact:
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
            slots[name] = self._other_number(plain_text(value))
        elif isinstance(value, Ref):
            slots[name] = self._other_ref(value)
        else:
            slots[name] = [*value[:-1], self._other_ref(value[-1])]
        return Fact(fact.kind, fact.subject, slots)

    def _other_number(self, text: str) -> str:
        if text.endswith("million"):
            return f"{float(text.split()[0]) * self.rng.uniform(1.5, 3):.1f} million"
        return f"{round_significant(int(text.replace(',', '')) * self.rng.uniform(1.5, 4), 2):,}"

    def _other_ref(self, ref: Ref) -> Ref:
        pool = [e for e in self.world.of_kind(ref.entity.kind) if e is not ref.entity] if ref.entity.has_article \
            else [p for p in self.world.people]
        return mention(self.rng.choice(pool))

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


def _traits(entity: Entity) -> tuple[set, set]:
    """(countries, industries) an entity belongs to, by qid."""
    if isinstance(entity, Company):
        return {entity.country.qid}, {entity.industry.qid}
    if isinstance(entity, Person):
        roles = entity.founded + ([entity.ceo_of] if entity.ceo_of else [])
        return {entity.country.qid}, {c.industry.qid for c in roles}
    if isinstance(entity, City):
        return {entity.country.qid}, set()
    if isinstance(entity, Country):
        return {entity.qid}, set()
    return set(), {entity.qid}


def _shared(a: tuple[set, set], b: tuple[set, set]) -> str:
    country, industry = bool(a[0] & b[0]), bool(a[1] & b[1])
    return {(True, True): "both", (True, False): "country", (False, True): "industry"}.get((country, industry), "none")


def write_sts(rng: random.Random, world: World, sts_dir: Path, per_split: int) -> dict[str, int]:
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
    slots = {name: plain_text(value) for name, value in fact.slots.items()}
    if "year" in fact.slots:
        slots["decade"] = str(int(fact.slots["year"]) // 10 * 10)
    return finish_sentence(past_tense_if_dead(fact.subject, pattern.format(s=subject_text(fact.subject), **slots)))


def _nli_triples(rng: random.Random, world: World, count: int) -> list[tuple[str, str, str, str]]:
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
        changed = [name for name in fact.slots if plain_text(fact.slots[name]) != plain_text(wrong.slots[name])]
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


def write_nli(rng: random.Random, world: World, nli_dir: Path, premises: int) -> dict[str, int]:
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
