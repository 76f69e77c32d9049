"""RuleTaker-style theories for the shipped samples of GEM's ``logic:RuleTaker-d*`` ids.

A theory is a few facts ("The cat is red.") and rules ("If something is red then it is big.",
"If something is big and red then it is kind."); a question asks whether a statement follows,
under the closed-world assumption RuleTaker uses (what the theory does not imply is false).
Labels come from forward chaining, which also gives each fact its depth: 0 for a stated fact,
else one more than the deepest premise of the shallowest rule application deriving it. A
``RuleTaker-d{i}`` sample asks questions of every depth up to ``i``, each question at the
depth it says; half state a derived fact (True), half its negation (False).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

ENTITIES = ["bear", "cat", "dog", "mouse", "rabbit", "tiger", "lion", "squirrel", "cow", "eagle"]
ATTRIBUTES = ["big", "blue", "cold", "green", "kind", "nice", "red", "rough", "round", "young", "furry", "quiet"]
QUESTION = (
    "Based only on the facts and rules above (anything they do not imply is false), "
    "is the following statement true or false?\n{statement}"
)

Fact = tuple[str, str]  # (entity, attribute): "The cat is red."


@dataclass(frozen=True)
class Rule:
    """If something is every one of ``premises`` then it is ``conclusion``."""

    premises: tuple[str, ...]
    conclusion: str

    def sentence(self) -> str:
        return f"If something is {' and '.join(self.premises)} then it is {self.conclusion}."


def depths(facts: set[Fact], rules: list[Rule]) -> dict[Fact, int]:
    """Every fact the theory implies, with its depth (see the module's docstring)."""
    known = {fact: 0 for fact in facts}
    entities = {entity for entity, _ in facts}
    changed = True
    while changed:  # a shallower derivation can appear late, so run to a fixed point
        changed = False
        for rule in rules:
            for entity in entities:
                premises = [known.get((entity, p)) for p in rule.premises]
                if any(d is None for d in premises):
                    continue
                depth = 1 + max(d for d in premises if d is not None)
                fact = (entity, rule.conclusion)
                if depth < known.get(fact, depth + 1):
                    known[fact] = depth
                    changed = True
    return known


def _theory(rng: random.Random, depth: int) -> tuple[set[Fact], list[Rule], Fact]:
    """A theory implying a fact at exactly ``depth`` (a chain of rules to it among distractors)."""
    while True:
        entities = rng.sample(ENTITIES, 3)
        target_entity = entities[0]
        chain = rng.sample(ATTRIBUTES, depth + 1)
        facts = {(target_entity, chain[0])}
        rules: list[Rule] = []
        for k in range(depth):
            helper = [a for a in ATTRIBUTES if a not in chain]
            if rng.random() < 0.4 and k > 0:  # a two-premise step, its second premise stated
                extra = rng.choice(helper)
                facts.add((target_entity, extra))
                rules.append(Rule(tuple(sorted((chain[k], extra))), chain[k + 1]))
            else:
                rules.append(Rule((chain[k],), chain[k + 1]))
        for _ in range(rng.randrange(2, 5)):  # distracting facts and rules
            facts.add((rng.choice(entities), rng.choice(ATTRIBUTES)))
        for _ in range(rng.randrange(1, 4)):
            premise, conclusion = rng.sample(ATTRIBUTES, 2)
            rules.append(Rule((premise,), conclusion))
        target = (target_entity, chain[-1])
        if depths(facts, rules).get(target) == depth:  # no distractor made a shortcut
            return facts, rules, target


def theory_text(facts: set[Fact], rules: list[Rule], rng: random.Random) -> str:
    sentences = [f"The {entity} is {attribute}." for entity, attribute in sorted(facts)]
    sentences += [rule.sentence() for rule in rules]
    rng.shuffle(sentences)
    return " ".join(sentences)


def sample_rows(max_depth: int, n: int = 6) -> list[dict[str, object]]:
    """``n`` questions for ``RuleTaker-d{max_depth}``: depths cycle 0..max_depth (the deepest
    first), answers alternate True and False."""
    rng = random.Random(f"RuleTaker-d{max_depth}")
    rows = []
    for i in range(n):
        depth = max_depth - i % (max_depth + 1)
        facts, rules, (entity, attribute) = _theory(rng, depth)
        true = i % 2 == 0
        statement = f"The {entity} is {attribute}." if true else f"The {entity} is not {attribute}."
        question = f"{theory_text(facts, rules, rng)}\n\n{QUESTION.format(statement=statement)}"
        rows.append({"question": question, "answer": "True" if true else "False", "depth": depth})
    return rows
