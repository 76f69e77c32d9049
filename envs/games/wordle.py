"""Wordle: find a secret word from per-letter green/yellow/grey feedback."""

from __future__ import annotations

import re

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame
from gem_sandbox_envs.games.words import is_word, word_list

_LETTERS = re.compile(r"[a-zA-Z]+(?:\s+[a-zA-Z]+)*")


def feedback(secret: str, guess: str) -> str:
    """One mark per letter: G right place, Y elsewhere in the word, X absent.

    A repeated letter is marked Y only as many times as the secret has it unmatched.
    """
    marks = ["G" if g == s else "X" for g, s in zip(guess, secret)]
    unmatched = [s for g, s in zip(guess, secret) if g != s]
    for i, letter in enumerate(guess):
        if marks[i] == "X" and letter in unmatched:
            marks[i] = "Y"
            unmatched.remove(letter)
    return "".join(marks)


class WordleEnv(TextGame[str]):
    """Find a ``word_length``-letter everyday word within ``max_turns`` guesses.

    Each position turned green for the first time earns ``0.5 / word_length`` and the win
    another 0.5, so a won game returns 1.0 in total, as in GEM. With ``only_real_words`` a guess
    must be a dictionary word (otherwise it is invalid and costs the turn).
    """

    action_format = r"\boxed{CRANE}"

    def __init__(
        self,
        word_length: int | None = 5,
        only_real_words: bool = True,
        max_turns: int | None = 20,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, word_length=word_length, max_turns=max_turns)
        self.only_real_words = only_real_words

    def new_game(self) -> None:
        self.secret = self.rng.choice(word_list(self.word_length)).upper()
        self.guesses: set[str] = set()
        self.greens = [False] * self.word_length

    def random_settings(self) -> tuple[int, int]:
        """GEM's ``-random`` words: 3 to 5 letters, 5 turns per letter."""
        length = self.rng.randint(3, 5)
        return length, 5 * length

    def parse_move(self, answer: str) -> str | None:
        return "".join(answer.split()).upper() if _LETTERS.fullmatch(answer) else None

    def play(self, guess: str) -> Outcome:
        turn = f"At turn {self.turn_count}, you guessed {guess}"
        if len(guess) != self.word_length:
            obs = (
                f"{turn} which has {len(guess)} letters but the secret word has "
                f"{self.word_length} letters."
            )
            return self.invalid(obs)
        if guess in self.guesses:
            return self.invalid(f"{turn}, which has been already guessed before.")
        if self.only_real_words and not is_word(guess):
            return self.invalid(f"{turn}, which is not a word in the dictionary.")
        self.guesses.add(guess)
        marks = feedback(self.secret, guess)
        new_greens = [i for i, mark in enumerate(marks) if mark == "G" and not self.greens[i]]
        for i in new_greens:
            self.greens[i] = True
        reward = 0.5 * len(new_greens) / self.word_length
        if guess == self.secret:
            obs = (
                f"Congratulations! You guessed the secret word {self.secret} "
                f"in {self.turn_count} turns."
            )
            return self.game_over(obs, reward + 0.5 * GameReward.SUCCESS)
        return self.ongoing(f"{turn}\nFeedback:\n{' '.join(guess)}\n{' '.join(marks)}", reward)

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(word_list(self.word_length)).upper()}}}"

    def instructions(self) -> str:
        real_words = "Every guess must be an English word.\n" if self.only_real_words else ""
        return (
            "You are playing Wordle.\n"
            f"You have to guess the secret {self.word_length}-letter word "
            f"within {self.max_turns} turns.\n"
            f"{real_words}"
            "After you enter your guess, I will mark your guess as follows:\n"
            "  - G (green): correct letter in the correct position\n"
            "  - Y (yellow): letter exists in the word but in the wrong position\n"
            "  - X (wrong): letter is not in the word\n"
            "After thinking, format your final answer inside \\boxed{...},"
            f" for example, {self.sample_random_action()}.\n"
            "As you play, the history of your guesses will be appended below. "
            "Use the information to complete the game before you run out of guesses.\n"
        )

    def suffix(self) -> str:
        return "Enter your guess."
