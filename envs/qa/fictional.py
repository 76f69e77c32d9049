"""gem-sandbox's fictional world: a small encyclopedia no model has read, and questions on it.

GEM's QA datasets ask about the real world, which a model may answer from memory; a search
episode on them does not show that the search found anything. This world is made up (from a
fixed seed, by :func:`build`): regions, rivers, towns, people and companies with attributes
and relations, one document per entity in the Search-R1 corpus format (``{"id", "contents":
"Title\\nbody"}``). Its questions can only be answered from those documents:

- single-hop, one document holds the answer: "In which town was Orla Quennet born?"
- two-hop, the first document names a bridge entity whose own document holds the answer:
  "In which town was the founder of Vellmark Works born?" (the company's document names the
  founder, the founder's gives the town). The answer never appears in the first document.

Each question row carries ``hops`` and ``docs``, the ids of its supporting documents in the
order they are needed. The world is shipped in ``data/`` (``fictional-world.corpus.jsonl``
and ``fictional-world.questions.jsonl``, see :mod:`.samples`) and served by
``qa:FictionalWorld-v0``; it is gem-sandbox's own, not one of GEM's datasets.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field

SEED = 2718
N_REGIONS, N_RIVERS, N_TOWNS, N_PEOPLE, N_COMPANIES = 5, 8, 30, 90, 40

_ONSETS = ["b", "br", "d", "dr", "f", "g", "gr", "h", "k", "l", "m", "n", "p", "r", "s", "st", "t", "th", "v", "w"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou", "ia"]
_CODAS = ["", "", "n", "r", "l", "m", "s", "nd", "rk", "ll", "st", "v"]
_TOWN_ENDINGS = ["mere", "wick", "ford", "holt", "by", "stead", "haven", "moor", "gate", "combe"]
_SURNAME_ENDINGS = ["et", "ow", "in", "ard", "ley", "ser", "ane", "ick", "ov", "ell"]
_REGION_ENDINGS = ["val", "land", "mark", "dor", "ria"]
_COMPANY_ENDINGS = ["mark", "ton", "dale", "crest", "field"]
_FIRST_NAMES = [
    "Orla", "Teodric", "Maelis", "Bram", "Isolde", "Caspar", "Wenna", "Aurel", "Linnea", "Jory",
    "Sabeth", "Ottoline", "Piers", "Rhosyn", "Edric", "Yselle", "Tamsin", "Corvin", "Hesper", "Anselm",
    "Brisa", "Dorran", "Elowen", "Fenwick", "Greer", "Halden", "Ilse", "Jaspar", "Kestrel", "Lorcan",
]  # fmt: skip
_OCCUPATIONS = [
    "glassblower", "clockmaker", "cartographer", "brewer", "engraver", "shipwright", "botanist",
    "printer", "stonemason", "weaver", "astronomer", "luthier", "chemist", "bookbinder", "surveyor",
]  # fmt: skip
_PRODUCTS = {  # company kind -> what it makes
    "Works": "clocks", "Foundry": "bells", "Mills": "woollen cloth", "Press": "books and maps",
    "Instruments": "telescopes", "Brewery": "ale", "Ropeworks": "rope", "Glassworks": "lenses",
}  # fmt: skip
_TOWN_TRADES = ["salt", "wool", "slate", "cider", "lace", "cheese", "tin", "pottery", "timber", "honey"]


@dataclass(frozen=True)
class Town:
    name: str
    region: str
    river: str
    founded: int
    trade: str


@dataclass(frozen=True)
class Person:
    name: str
    born: int
    died: int
    birthplace: str
    occupation: str
    teacher: str | None  # another person, born earlier


@dataclass(frozen=True)
class Company:
    name: str
    founder: str
    founded: int
    headquarters: str
    product: str


@dataclass
class World:
    regions: list[str] = field(default_factory=list)
    rivers: list[str] = field(default_factory=list)  # "River Tolle"
    towns: list[Town] = field(default_factory=list)
    people: list[Person] = field(default_factory=list)
    companies: list[Company] = field(default_factory=list)


class _Names:
    """Invented names, each used once, none a word of another (so a name in a document is that
    entity, never part of another's)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = {n.lower() for n in _FIRST_NAMES} | {"river", "corrish", "republic"}

    def _root(self, syllables: int) -> str:
        return "".join(
            self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS) for _ in range(syllables)
        )

    def make(self, endings: list[str], syllables: int = 1) -> str:
        while True:
            word = (self._root(syllables) + self.rng.choice(endings)).capitalize()
            if word.lower() not in self.used and 5 <= len(word) <= 11:
                self.used.add(word.lower())
                return word


def build(seed: int = SEED) -> World:
    """The world of ``seed``: the same one every time, on every platform."""
    rng = random.Random(seed)
    names = _Names(rng)
    world = World()
    world.regions = [names.make(_REGION_ENDINGS, 2) for _ in range(N_REGIONS)]
    world.rivers = [f"River {names.make(['', 'e', 'a', 'en'], 1)}" for _ in range(N_RIVERS)]
    for _ in range(N_TOWNS):
        world.towns.append(
            Town(
                names.make(_TOWN_ENDINGS),
                rng.choice(world.regions),
                rng.choice(world.rivers),
                rng.randrange(1100, 1700),
                rng.choice(_TOWN_TRADES),
            )
        )
    births = sorted(rng.randrange(1760, 1900) for _ in range(N_PEOPLE))
    for born in births:
        elders = [p for p in world.people if p.born <= born - 15]
        teacher = rng.choice(elders).name if elders and rng.random() < 0.7 else None
        world.people.append(
            Person(
                f"{rng.choice(_FIRST_NAMES)} {names.make(_SURNAME_ENDINGS)}",
                born,
                born + rng.randrange(38, 90),
                rng.choice(world.towns).name,
                rng.choice(_OCCUPATIONS),
                teacher,
            )
        )
    founders = rng.sample(world.people, N_COMPANIES)
    for founder in founders:
        kind = rng.choice(sorted(_PRODUCTS))
        # Never in the founder's birthplace: "where was the founder of X born?" needs two hops.
        headquarters = rng.choice([t.name for t in world.towns if t.name != founder.birthplace])
        world.companies.append(
            Company(
                f"{names.make(_COMPANY_ENDINGS)} {kind}",
                founder.name,
                founder.born + rng.randrange(22, 50),
                headquarters,
                _PRODUCTS[kind],
            )
        )
    return world


def documents(world: World) -> list[tuple[str, str]]:
    """(title, body) of every entity's document, in a fixed order: regions, rivers, towns,
    people, companies. People's documents never name the companies they founded, so a
    company's founder is found only through the company's document."""
    docs: list[tuple[str, str]] = []
    for region in world.regions:
        towns = [t.name for t in world.towns if t.region == region]
        listed = _series(towns) if towns else "no towns of note"
        docs.append((region, f"{region} is an upland region of the Corrish Republic. Its towns include {listed}."))
    for river in world.rivers:
        towns = [t.name for t in world.towns if t.river == river]
        course = f"It flows through {_series(towns)}." if towns else "No town stands on its banks."
        docs.append((river, f"The {river} is a river of the Corrish Republic. {course}"))
    for town in world.towns:
        docs.append(
            (
                town.name,
                f"{town.name} is a market town in the {town.region} region, on the banks of the {town.river}. "
                f"It was founded in {town.founded} and is known for its {town.trade}.",
            )
        )
    for person in world.people:
        trained = f" {person.name} trained under {person.teacher}." if person.teacher else ""
        docs.append(
            (
                person.name,
                f"{person.name} ({person.born}-{person.died}) was a {person.occupation} "
                f"born in the town of {person.birthplace}.{trained}",
            )
        )
    for company in world.companies:
        docs.append(
            (
                company.name,
                f"{company.name} is a maker of {company.product}, founded in {company.founded} "
                f"by {company.founder}. Its headquarters are in {company.headquarters}.",
            )
        )
    return docs


def _series(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _river_answers(river: str) -> list[str]:
    return [river, river.removeprefix("River ")]


def questions(world: World) -> list[dict[str, object]]:
    """Every question of the world, single-hop then two-hop. ``answer`` is a string, or a list
    of accepted strings ("River Tolle" or "Tolle")."""
    ids = {title: str(i) for i, (title, _) in enumerate(documents(world))}
    people = {p.name: p for p in world.people}
    towns = {t.name: t for t in world.towns}
    rows: list[dict[str, object]] = []

    def ask(question: str, answer: str | list[str], *titles: str) -> None:
        rows.append({"question": question, "answer": answer, "hops": len(titles), "docs": [ids[t] for t in titles]})

    for p in world.people:
        ask(f"In which town was {p.name} born?", p.birthplace, p.name)
        ask(f"What was the occupation of {p.name}?", p.occupation, p.name)
    for c in world.companies:
        ask(f"Who founded {c.name}?", c.founder, c.name)
        ask(f"In what year was {c.name} founded?", str(c.founded), c.name)
        ask(f"In which town does {c.name} have its headquarters?", c.headquarters, c.name)
    for t in world.towns:
        ask(f"In which region is {t.name}?", t.region, t.name)
        ask(f"Which river flows through {t.name}?", _river_answers(t.river), t.name)
    for c in world.companies:
        founder = people[c.founder]
        ask(f"In which town was the founder of {c.name} born?", founder.birthplace, c.name, founder.name)
        ask(f"In what year was the founder of {c.name} born?", str(founder.born), c.name, founder.name)
        hq = towns[c.headquarters]
        ask(f"In which region is the town where {c.name} has its headquarters?", hq.region, c.name, hq.name)
    for p in world.people:
        ask(
            f"Which river flows through the town where {p.name} was born?",
            _river_answers(towns[p.birthplace].river),
            p.name,
            p.birthplace,
        )
        if p.teacher and people[p.teacher].birthplace != p.birthplace:
            teacher = people[p.teacher]
            ask(f"In which town was the teacher of {p.name} born?", teacher.birthplace, p.name, teacher.name)
    for number, row in enumerate(rows):
        row["id"] = f"fw-{number:04d}"
    return rows


def corpus_jsonl(world: World) -> str:
    """The world's documents as a Search-R1 corpus: one ``{"id", "contents"}`` line each."""
    rows = ({"id": str(i), "contents": f"{title}\n{body}"} for i, (title, body) in enumerate(documents(world)))
    return "".join(json.dumps(row) + "\n" for row in rows)


def questions_jsonl(world: World) -> str:
    keys = ("id", "question", "answer", "hops", "docs")
    return "".join(json.dumps({k: row[k] for k in keys}) + "\n" for row in questions(world))


def mentions(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` as whole words (case-insensitive)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None
