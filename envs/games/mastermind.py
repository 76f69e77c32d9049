"""Mastermind: deduce a secret code from black and white peg counts."""

from __future__ import annotations

import re
from collections import Counter

from gem_sandbox_envs.games.base import Outcome, TextGame

_DIGITS = re.compile(r"\d+(?:\s+\d+)*")


def score(code: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """(black, white) pegs: right digit in the right place, right digit in the wrong place."""
    black = sum(c == g for c, g in zip(code, guess))
    common = sum((Counter(code) & Counter(guess)).values())
    return black, common - black


class MastermindEnv(TextGame[tuple[int, ...]]):
    """Guess a code of ``code_length`` digits from 1 to ``num_numbers`` within ``max_turns``.

    Each new black peg earns ``1 / code_length`` (GEM's milestone reward), so a won game
    returns 1.0 in total. Leaving a setting None draws one of GEM's random settings per episode.
    """

    action_format = r"\boxed{1 2 3 4}"

    #: (code_length, num_numbers, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(2, 4, 10), (4, 6, 20), (4, 8, 30)]

    def __init__(
        self,
        code_length: int | None = 4,
        num_numbers: int | None = 6,
        duplicate_numbers: bool = False,
        max_turns: int | None = 20,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            seed, code_length=code_length, num_numbers=num_numbers, max_turns=max_turns
        )
        self.duplicate_numbers = duplicate_numbers

    def new_game(self) -> None:
        digits = range(1, self.num_numbers + 1)
        draw = self.rng.choices if self.duplicate_numbers else self.rng.sample
        self.code = tuple(draw(digits, k=self.code_length))
        self.guesses: set[tuple[int, ...]] = set()
        self.best_black = 0

    def parse_move(self, answer: str) -> tuple[int, ...] | None:
        return tuple(map(int, answer.split())) if _DIGITS.fullmatch(answer) else None

    def play(self, guess: tuple[int, ...]) -> Outcome:
        shown = " ".join(map(str, guess))
        turn = f"At turn {self.turn_count}, you guessed {shown}"
        if len(guess) != self.code_length:
            obs = (
                f"{turn}, which has {len(guess)} entries but the code has length "
                f"{self.code_length}."
            )
            return self.invalid(obs)
        if not all(1 <= digit <= self.num_numbers for digit in guess):
            obs = f"{turn}, which has numbers outside the range 1 to {self.num_numbers}."
            return self.invalid(obs)
        if guess in self.guesses:
            return self.invalid(f"{turn}, which has been already guessed before.")
        self.guesses.add(guess)
        black, white = score(self.code, guess)
        reward = max(0, black - self.best_black) / self.code_length
        self.best_black = max(self.best_black, black)
        if black == self.code_length:
            return self.game_over(
                f"Congratulations! You guessed the correct code {shown} "
                f"in {self.turn_count} turns.",
                reward,
            )
        return self.ongoing(
            f"{turn}. This guess receives {black} black peg(s) and {white} white peg(s).", reward
        )

    def sample_random_action(self) -> str:
        guess = self.rng.sample(range(1, self.num_numbers + 1), self.code_length)
        return f"\\boxed{{{' '.join(map(str, guess))}}}"

    def instructions(self) -> str:
        return (
            "You are playing Mastermind.\n"
            f"You have to guess the secret {self.code_length} digit code "
            f"within {self.max_turns} turns.\n"
            f"The code consists of digits from 1 to {self.num_numbers} (inclusive). "
            f"Duplicate numbers are {'allowed' if self.duplicate_numbers else 'not allowed'}.\n"
            "After you enter your guess, I will mark your guess with black and white pegs, where a "
            "black peg indicates a correct digit in the correct position, "
            "while a white peg indicates a correct digit in the wrong position.\n"
            "Write the digits separated by spaces. After thinking, format your final answer inside "
            f"\\boxed{{...}}, for example, {self.sample_random_action()}.\n"
            "As you play, the history of your guesses will be appended below. "
            "Use the information to complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def suffix(self) -> str:
        return "Enter your guess."
