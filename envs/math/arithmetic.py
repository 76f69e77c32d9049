"""Generated arithmetic problems with exact answers: big enough that a tool call pays off.

Each episode draws one problem from ``self.rng`` (so ``reset(seed=s)`` repeats it): a product
of large numbers, a modular power, a sum over a range, a prime count or a digit sum. The env is
single-turn, as GEM's math envs are: the first action is the answer, read from its last
``\\boxed{}``; reward 1.0 when it equals the exact answer, else 0; ``info`` has ``correct`` and
``status`` (``"ok"``, or ``"format_error"`` without a boxed answer). A second step raises
:class:`~gem_sandbox.core.ResetNeeded`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from gem_sandbox_envs.math.grading import answers_match

from gem_sandbox.core import Env, ResetReturn, StepReturn
from gem_sandbox.utils.parsing import last_boxed_answer

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"  # GEM's observation after a single-turn episode
INSTRUCTION = "Put your final answer within \\boxed{}."

Problem = tuple[str, int]  # (question, answer)


def product(rng: random.Random) -> Problem:
    a, b = rng.randint(1_000, 99_999), rng.randint(1_000, 99_999)
    return f"What is {a} multiplied by {b}?", a * b


def modular_power(rng: random.Random) -> Problem:
    base, exponent, modulus = rng.randint(2, 99), rng.randint(100, 10_000), rng.randint(7, 9_973)
    return f"What is the remainder when {base}^{exponent} is divided by {modulus}?", pow(base, exponent, modulus)


def multiples_sum(rng: random.Random) -> Problem:
    low = rng.randint(1, 500)
    high, step = low + rng.randint(500, 5_000), rng.randint(3, 17)
    total = sum(n for n in range(low, high + 1) if n % step == 0)
    return f"What is the sum of all multiples of {step} from {low} to {high} inclusive?", total


def prime_count(rng: random.Random) -> Problem:
    limit = rng.randint(100, 5_000)
    count = sum(1 for n in range(2, limit) if all(n % d for d in range(2, math.isqrt(n) + 1)))
    return f"How many prime numbers are less than {limit}?", count


def power_digit_sum(rng: random.Random) -> Problem:
    base, exponent = rng.randint(2, 9), rng.randint(20, 200)
    return f"What is the sum of the decimal digits of {base}^{exponent}?", sum(map(int, str(base**exponent)))


KINDS: dict[str, Callable[[random.Random], Problem]] = {
    "product": product,
    "modular_power": modular_power,
    "multiples_sum": multiples_sum,
    "prime_count": prime_count,
    "power_digit_sum": power_digit_sum,
}


class ArithmeticEnv(Env[str, str]):
    """One generated problem per episode; ``kinds`` restricts them to some of :data:`KINDS`."""

    blocking = False

    def __init__(self, kinds: list[str] | None = None, seed: int | None = None, **_: Any) -> None:
        super().__init__(seed)
        unknown = set(kinds or ()) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown problem kinds {sorted(unknown)}; choose from {sorted(KINDS)}")
        self.kinds = list(kinds or KINDS)
        self.question = ""
        self.answer = ""

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        self.seed_rng(seed)
        question, answer = KINDS[self.rng.choice(self.kinds)](self.rng)
        self.question, self.answer = question, str(answer)
        return f"{question} {INSTRUCTION}", {}

    def step(self, action: str) -> StepReturn:
        answer = last_boxed_answer(action)
        correct = answers_match(answer, self.answer)
        status = "ok" if answer is not None and answer.strip() else "format_error"  # as the dataset envs
        return TERMINAL_STATE, 1.0 if correct else 0.0, True, True, {"correct": correct, "status": status}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(0, 1000)}}}"
