"""Guess the Number: find a hidden integer from higher/lower hints."""

from __future__ import annotations

import math
import re

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame

_INTEGER = re.compile(r"[+-]?\d+")


class GuessTheNumberEnv(TextGame[int]):
    """Guess a number in ``[min_number, max_number]`` within ``max_turns`` guesses.

    Leaving any setting None draws the range and turn budget per episode, as GEM's
    ``-random`` variant does. Running out of turns scores the last guess by its closeness.
    """

    action_format = r"\boxed{7}"

    def __init__(
        self,
        min_number: int | None = 1,
        max_number: int | None = 20,
        max_turns: int | None = 20,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, min_number=min_number, max_number=max_number, max_turns=max_turns)

    def new_game(self) -> None:
        self.target = self.rng.randint(self.min_number, self.max_number)
        self.guesses: set[int] = set()

    def random_settings(self) -> tuple[int, int, int]:
        """GEM's ``-random`` range, with ``ceil(sqrt(width)) + 1`` turns: enough to bisect it."""
        low = self.rng.randint(1, 10)
        high = self.rng.randint(low + 5, low + 50)
        return low, high, math.ceil(math.sqrt(high - low)) + 1

    def parse_move(self, answer: str) -> int | None:
        return int(answer) if _INTEGER.fullmatch(answer) else None

    def play(self, guess: int) -> Outcome:
        turn = f"At turn {self.turn_count}, you guessed {guess}"
        if not self._in_range(guess):
            return self.invalid(f"{turn}, which is outside the range specified.")
        if guess in self.guesses:
            return self.invalid(f"{turn}, which has been already guessed before.")
        self.guesses.add(guess)
        if guess == self.target:
            obs = (
                f"Congratulations! You guessed the correct number {guess} "
                f"in {self.turn_count} turns."
            )
            return self.game_over(obs, GameReward.SUCCESS)
        hint = "lower" if guess > self.target else "higher"
        return self.ongoing(f"{turn}, and the target number is {hint} than {guess}.")

    def timeout_reward(self, guess: int, reward: float) -> float:
        if not self._in_range(guess):
            return GameReward.INVALID_ACTION
        return 1 - abs(guess - self.target) / (self.max_number - self.min_number)

    def _in_range(self, guess: int) -> bool:
        return self.min_number <= guess <= self.max_number

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(self.min_number, self.max_number)}}}"

    def instructions(self) -> str:
        return (
            "You are playing Guess The Number.\n"
            f"You have to guess the number between {self.min_number} and {self.max_number} "
            f"(inclusive) within {self.max_turns} turns.\n"
            "As you enter your guess, the game will provide you with hints such as the "
            "target number is 'higher' or 'lower'.\n"
            "You may provide your response in any manner. Only the number that is wrapped inside "
            "\\boxed{} will be considered as your guess, for example, "
            f"{self.sample_random_action()}.\n"
            "As you play, the history of your guesses will be appended below. "
            "Use the information to complete the game before you run out of guesses.\n"
            "Enter your first guess to start the game.\n"
        )

    def suffix(self) -> str:
        return "Enter your next guess."
