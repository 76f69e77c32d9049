"""Hangman: uncover a secret word by guessing letters or the whole word."""

from __future__ import annotations

import re
import string

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame
from gem_sandbox_envs.games.words import word_list

_LETTERS = re.compile(r"[a-zA-Z]+")


class HangmanEnv(TextGame[str]):
    """Find a ``word_length``-letter word within ``max_turns`` guesses of a letter or a word.

    Uncovering letters earns half a point spread over the word's letters; winning (guessing the
    word, or uncovering its last letter) earns the other half plus the share of letters still
    hidden, so a won game returns 1.0 in total, as in GEM. Secrets are everyday words, or any
    dictionary word when ``hardcore``.
    """

    action_format = r"\boxed{E}"

    #: (word_length, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(3, 10), (5, 15), (7, 20)]

    def __init__(
        self,
        word_length: int | None = 5,
        hardcore: bool = False,
        max_turns: int | None = 20,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, word_length=word_length, max_turns=max_turns)
        self.hardcore = hardcore

    def new_game(self) -> None:
        self.secret = self.rng.choice(self._words()).upper()
        self.board = ["_"] * self.word_length
        self.guessed_letters: set[str] = set()

    def _words(self) -> tuple[str, ...]:
        return word_list(self.word_length, common=not self.hardcore)

    def parse_move(self, answer: str) -> str | None:
        return answer.upper() if _LETTERS.fullmatch(answer) else None

    def play(self, guess: str) -> Outcome:
        turn = f"At turn {self.turn_count}, you guessed '{guess}'"
        if len(guess) > 1:
            if guess == self.secret:
                hidden_share = 0.5 * self.board.count("_") / self.word_length
                obs = f"Congratulations! You guessed the word '{self.secret}' correctly!"
                return self.game_over(obs, hidden_share + 0.5 * GameReward.SUCCESS)
            if len(guess) != self.word_length:
                obs = (
                    f"{turn} which is of length {len(guess)}, but the secret word is of length "
                    f"{self.word_length}."
                )
                return self.invalid(obs)
            return self.ongoing(f"{turn} which is incorrect.")
        if guess in self.guessed_letters:
            return self.invalid(f"{turn}, which has been already guessed before.")
        self.guessed_letters.add(guess)
        if guess not in self.secret:
            return self.ongoing(f"{turn}, a letter that is not in the secret word.")
        positions = [i for i, letter in enumerate(self.secret) if letter == guess]
        for i in positions:
            self.board[i] = guess
        reward = 0.5 * len(positions) / self.word_length
        if "_" not in self.board:
            obs = f"Congratulations! You uncovered the word '{self.secret}'!"
            return self.game_over(obs, reward + 0.5 * GameReward.SUCCESS)
        return self.ongoing(f"{turn}, a letter that is in the secret word.", reward)

    def sample_random_action(self) -> str:
        if self.rng.random() < 0.5:
            return self._sample_word()
        return self._sample_letter()

    def _sample_word(self) -> str:
        return f"\\boxed{{{self.rng.choice(self._words()).upper()}}}"

    def _sample_letter(self) -> str:
        return f"\\boxed{{{self.rng.choice(string.ascii_uppercase)}}}"

    def render(self) -> str:
        header = " ".join(f"C{i:02}" for i in range(self.word_length))
        return header + "\n" + "".join(f"  {letter} " for letter in self.board)

    def instructions(self) -> str:
        return (
            "You are playing Hangman.\n"
            f"The objective of the game is to guess the {self.word_length}-letter word "
            "by providing one letter guesses or the entire word.\n"
            "The cells that need to be populated with letters are represented by '_'.\n\n"
            "There are two ways you can answer. You can provide one letter guesses in the "
            f"format of {self._sample_letter()}, or you can guess the entire word in the format of "
            f"{self._sample_word()}.\n"
            "If the given letter is in the word, it will be revealed in the grid.\n"
            "If the given word is correct, you win.\n"
            "As you play, the history of your choices will be appended below. "
            "Use the information to figure out the word and win.\n"
            "Some rules:\n"
            "1. You can only guess one letter/word at a time.\n"
            f"2. You have to win within {self.max_turns} turns.\n\n"
        )

    def suffix(self) -> str:
        return (
            f"Here is the current state of the Hangman grid:\n{self.render()}\n\nEnter your guess."
        )
