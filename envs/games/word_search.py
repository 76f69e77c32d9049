"""Word search: find the words hidden across and down in a grid of letters."""

from __future__ import annotations

import re
import string
from functools import cache

from gem_sandbox_envs.games import lines
from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame
from gem_sandbox_envs.games.words import word_list

_MOVE = re.compile(r"(\d+)[\s,]+(\d+)[\s,]+(\d+)[\s,]+(\d+)")

_LETTERS = string.ascii_uppercase

_GRID_ATTEMPTS = 100  # word draws tried before falling back to one word per row
_FILL_ATTEMPTS = 10  # random fillings tried per layout

#: A guess: start row, start column, end row, end column.
Guess = tuple[int, int, int, int]


@cache
def _words(hardcore: bool) -> tuple[str, ...]:
    """Everyday words, or every dictionary word when ``hardcore`` (GEM's two NLTK lists)."""
    return tuple(word for length in range(3, 8) for word in word_list(length, not hardcore))


class WordSearchEnv(TextGame[Guess]):
    """Find ``num_words`` words hidden in a square grid of letters within ``max_turns`` guesses.

    A guess names a word's first and last cells (either way round). Words run across or down
    and may cross on a shared letter; the rest of the grid is random letters, redrawn until no
    hidden word shows up a second time. The words are everyday ones, or any dictionary word
    when ``hardcore``, as in GEM, and are not listed: spotting them is the game. Each word
    found earns ``1 / num_words``; finding them all wins.
    """

    action_format = r"\boxed{1 1 1 5}"

    #: (hardcore, num_words, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(False, 5, 20), (True, 5, 20)]

    def __init__(
        self,
        hardcore: bool | None = False,
        max_turns: int | None = 20,
        num_words: int | None = 5,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, hardcore=hardcore, num_words=num_words, max_turns=max_turns)

    def new_game(self) -> None:
        for _ in range(_GRID_ATTEMPTS):
            if self._generate():
                break
        else:
            self._rows_of_words()
        self.found: set[str] = set()
        self.attempts: set[Guess] = set()

    # -- grid generation ------------------------------------------------------------------
    def _draw_words(self) -> list[str]:
        """``num_words`` distinct random words, none inside another, longest first."""
        pool = _words(self.hardcore)
        words: list[str] = []
        for word in self.rng.sample(pool, min(len(pool), 10 * self.num_words)):
            word = word.upper()
            if not any(word in other or other in word for other in words):
                words.append(word)
                if len(words) == self.num_words:
                    break
        return sorted(words, key=len, reverse=True)

    def _generate(self) -> bool:
        words = self._draw_words()
        layout = lines.Layout(round(1.5 * len(words[0])))  # GEM's: half again the longest word
        for word in words:
            placement = self._place(word, layout)
            if placement is None:
                return False
            layout.place(word, placement)
        size = layout.size
        for _ in range(_FILL_ATTEMPTS):
            grid = [
                [layout.letters.get((r, c)) or self.rng.choice(_LETTERS) for c in range(size)]
                for r in range(size)
            ]
            if all(_occurrences(grid, word) == 1 for word in words):
                self.grid, self.placed_words = grid, layout.placements
                return True
        return False

    def _place(self, word: str, layout: lines.Layout) -> lines.Placement | None:
        """Where ``word`` goes, in a random direction if it can: the middle for the first word,
        then crossing a placed word if possible, as in GEM, else anywhere it fits."""
        directions = self.rng.sample(list(lines.DIRECTIONS), 2)
        size = layout.size
        if not layout.placements:
            middle, start = size // 2, (size - len(word)) // 2
            across = directions[0] == "across"
            return (middle, start, "across") if across else (start, middle, "down")
        for direction in directions:
            fits = [
                (row, col, direction)
                for row in range(size)
                for col in range(size)
                if layout.agrees(word, (row, col, direction))
            ]
            crossing = [
                p for p in fits if any(cell in layout.letters for cell in lines.cells(word, p))
            ]
            if crossing or fits:
                return self.rng.choice(crossing or fits)
        return None

    def _rows_of_words(self) -> None:
        """A grid that always works, never seen in practice: each word on a row of its own,
        with fillers from letters no word uses where there are some."""
        words = self._draw_words()
        size = max(len(words[0]), 2 * len(words) - 1)
        unused = sorted(set(_LETTERS) - set("".join(words))) or list(_LETTERS)
        self.grid = [[self.rng.choice(unused) for _ in range(size)] for _ in range(size)]
        self.placed_words = {}
        for i, word in enumerate(words):
            self.placed_words[word] = (2 * i, 0, "across")
            self.grid[2 * i][: len(word)] = list(word)

    # -- play -------------------------------------------------------------------------------
    def parse_move(self, answer: str) -> Guess | None:
        match = _MOVE.fullmatch(answer)
        return (int(match[1]), int(match[2]), int(match[3]), int(match[4])) if match else None

    def play(self, move: Guess) -> Outcome:
        start_row, start_col, end_row, end_col = move
        span = f"({start_row}, {start_col}) to ({end_row}, {end_col})"
        turn = f"At turn {self.turn_count}, you tried {span}"
        repeated = move in self.attempts
        self.attempts.add(move)
        size = len(self.grid)
        if not all(0 <= value < size for value in move):
            return self.invalid(f"{turn}, which is out of bounds.")
        if repeated:
            return self.invalid(f"At turn {self.turn_count}, you have already tried {span}.")
        if start_row != end_row and start_col != end_col:
            obs = f"{turn}, which is not valid because words run either across or down."
            return self.invalid(obs)
        word = self.word_at(move)
        if word is None:
            obs = f"At turn {self.turn_count}, incorrect attempt. No word found at {span}."
            return self.ongoing(obs)
        if word in self.found:
            return self.invalid(f"{turn}, but you have already found the word '{word}' there.")
        self.found.add(word)
        reward = GameReward.SUCCESS / len(self.placed_words)
        if len(self.found) == len(self.placed_words):
            return self.game_over("Congratulations! You completed the Word Search puzzle!", reward)
        obs = f"At turn {self.turn_count}, correct! You found the word '{word}' at {span}."
        return self.ongoing(obs, reward)

    def word_at(self, guess: Guess) -> str | None:
        """The hidden word whose first and last cells ``guess`` names, either way round."""
        start, end = guess[:2], guess[2:]
        for word, placement in self.placed_words.items():
            cells = lines.cells(word, placement)
            if {start, end} == {cells[0], cells[-1]}:
                return word
        return None

    def sample_random_action(self) -> str:
        coordinates = " ".join(str(self.rng.randrange(len(self.grid))) for _ in range(4))
        return f"\\boxed{{{coordinates}}}"

    def render(self) -> str:
        """The grid, letters of the words found in [brackets]; rows and columns from 0."""
        found = {cell for word in self.found for cell in lines.cells(word, self.placed_words[word])}
        header = "    " + " ".join(f"C{c:02}" for c in range(len(self.grid)))
        rows = [
            f"R{r:02} "
            + " ".join(
                f"[{letter}]" if (r, c) in found else f" {letter} " for c, letter in enumerate(line)
            ).rstrip()
            for r, line in enumerate(self.grid)
        ]
        return "\n".join([header, *rows])

    def instructions(self) -> str:
        return (
            f"You are playing a Word Search ({'Hardcore' if self.hardcore else 'Basic'}).\n"
            "Find the words hidden in the grid below. Rows and columns are numbered from 0, and "
            "the letters of the words you have found are shown in square brackets [ ].\n\n"
            "To name a word, give the row and column of its first and last letters. "
            "Words run either across (left to right) or down (top to bottom).\n"
            "Use the format \\boxed{start_row start_col end_row end_col}, for instance "
            "\\boxed{1 1 1 5} for a word from row 1, column 1 to row 1, column 5.\n\n"
            "Guidelines:\n"
            f"- You have at most {self.max_turns} turns to find all the words.\n"
            "- Each guess must be new: repeating a guess wastes the turn.\n"
            "- The history of your attempts will be recorded below.\n"
            "- Make your guesses carefully and strategically!"
        )

    def suffix(self) -> str:
        return (
            f"Current Board:\n{self.render()}\n"
            f"Words Found: {len(self.found)}/{len(self.placed_words)}\n"
            "Enter your guess."
        )


def _occurrences(grid: list[list[str]], word: str) -> int:
    """How often ``word`` reads across or down in ``grid``, overlaps counted."""
    lines = ["".join(line) for line in grid] + ["".join(column) for column in zip(*grid)]
    return sum(
        line.startswith(word, i) for line in lines for i in range(len(line) - len(word) + 1)
    )
