"""Crosswords: fill a small crossword from its clues, one letter per move."""

from __future__ import annotations

import json
import re
import string
from functools import cache
from importlib.resources import files

from gem_sandbox_envs.games import lines
from gem_sandbox_envs.games.base import Outcome, TextGame

_MOVE = re.compile(r"(\d+)[\s,]+(\d+)[\s,]+([a-zA-Z])")

_CLUES = "crossword_clues.jsonl"  # see data/README

_LAYOUT_ATTEMPTS = 200  # word draws tried before falling back to unconnected words


BLACK, EMPTY = ".", "_"


@cache
def clue_list(hardcore: bool) -> tuple[tuple[str, str], ...]:
    """The (word, clue) pairs shipped for everyday (or, when ``hardcore``, harder) words."""
    text = files(__package__).joinpath("data", _CLUES).read_text(encoding="utf-8")
    entries = (json.loads(line) for line in text.splitlines() if line.strip())
    return tuple(sorted((e["word"], e["clue"]) for e in entries if e["hardcore"] == hardcore))


class CrosswordsEnv(TextGame[tuple[int, int, str]]):
    """Fill the ``num_words`` crossing answers of a crossword within ``max_turns`` moves.

    Words and clues come from a shipped list: everyday words, or rarer ones when
    ``hardcore`` (GEM's two word sets). The words are laid out as a real crossword (they cross
    on shared letters and never touch otherwise, so every row and column of letters reads as
    one answer), with no more letters than turns. Each correct letter earns
    ``1 / letter cells`` (a solved puzzle returns 1.0 in total); a wrong letter earns nothing,
    as in GEM. Unlike GEM, each clue says where its answer starts.
    """

    action_format = r"\boxed{0 0 A}"

    #: (hardcore, num_words, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(False, 3, 20), (True, 3, 20)]

    def __init__(
        self,
        hardcore: bool | None = False,
        max_turns: int | None = 100,
        num_words: int | None = 5,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, hardcore=hardcore, num_words=num_words, max_turns=max_turns)

    def new_game(self) -> None:
        pool = clue_list(self.hardcore)
        for _ in range(_LAYOUT_ATTEMPTS):
            entries = self.rng.sample(pool, min(self.num_words, len(pool)))
            size, placements = self._layout([word for word, _ in entries])
            if placements is not None:
                break
        else:  # never seen in practice: the shortest words, in rows of their own
            entries = sorted(pool, key=lambda entry: (len(entry[0]), entry))[: self.num_words]
            size = max(max(len(word) for word, _ in entries), 2 * len(entries) - 1)
            placements = {word: (2 * i, 0, "across") for i, (word, _) in enumerate(entries)}
        self.clues = dict(entries)
        self.placed_words = dict(sorted(placements.items(), key=lambda item: item[1]))
        self.solution = [[BLACK] * size for _ in range(size)]
        for word, placement in self.placed_words.items():
            for (row, col), letter in zip(lines.cells(word, placement), word.upper()):
                self.solution[row][col] = letter
        self.board = [[BLACK if c == BLACK else EMPTY for c in line] for line in self.solution]
        self.total_letter_cells = sum(cell != BLACK for line in self.board for cell in line)

    def _layout(self, words: list[str]) -> tuple[int, dict[str, lines.Placement] | None]:
        """Place ``words``, longest first, each crossing one already placed: the grid size
        (GEM's: half as long again as the longest word) and the placements, or None if
        some word finds no place or the letters outnumber the turns."""
        words = sorted(words, key=len, reverse=True)
        layout = lines.Layout(round(1.5 * len(words[0])))
        size = layout.size
        for word in words:
            if not layout.placements:  # the first word goes in the middle, as in GEM
                direction = self.rng.choice(list(lines.DIRECTIONS))
                middle, start = size // 2, (size - len(word)) // 2
                across = direction == "across"
                candidates = [(middle, start, direction) if across else (start, middle, direction)]
            else:
                candidates = self._crossings(word, layout)
            if not candidates:
                return size, None
            layout.place(word, self.rng.choice(candidates))
        if len(layout.letters) > self.max_turns:
            return size, None
        return size, layout.placements

    def _crossings(self, word: str, layout: lines.Layout) -> list[lines.Placement]:
        """Every placement of ``word`` that crosses a placed word and touches no other."""
        found = []
        for direction in lines.DIRECTIONS:
            for row in range(layout.size):
                for col in range(layout.size):
                    placement = (row, col, direction)
                    if self._fits(word, placement, layout):
                        found.append(placement)
        return found

    @staticmethod
    def _fits(word: str, placement: lines.Placement, layout: lines.Layout) -> bool:
        if not layout.agrees(word, placement):
            return False
        d_row, d_col = lines.DIRECTIONS[placement[2]]
        cells = lines.cells(word, placement)
        (first_r, first_c), (last_r, last_c) = cells[0], cells[-1]
        before, after = (first_r - d_row, first_c - d_col), (last_r + d_row, last_c + d_col)
        letters = layout.letters
        if before in letters or after in letters:
            return False  # it would run on into another word
        crossings = 0
        for row, col in cells:
            if (row, col) in letters:
                crossings += 1
            elif (row + d_col, col + d_row) in letters or (row - d_col, col - d_row) in letters:
                return False  # side by side with another word's letter
        return crossings > 0

    def parse_move(self, answer: str) -> tuple[int, int, str] | None:
        match = _MOVE.fullmatch(answer)
        return (int(match[1]), int(match[2]), match[3].upper()) if match else None

    def play(self, move: tuple[int, int, str]) -> Outcome:
        row, col, letter = move
        turn = f"At turn {self.turn_count}, you tried to place {letter} at ({row}, {col})"
        size = len(self.board)
        if not (0 <= row < size and 0 <= col < size):
            return self.invalid(f"{turn}, which is out of bounds.")
        if self.board[row][col] == BLACK:
            return self.invalid(f"{turn}, which is a black cell and cannot be filled.")
        if self.board[row][col] != EMPTY:
            return self.invalid(f"{turn}, but the cell is already filled.")
        if self.solution[row][col] != letter:
            return self.ongoing(f"{turn}, but it is incorrect.")
        self.board[row][col] = letter
        reward = 1 / self.total_letter_cells
        if all(EMPTY not in line for line in self.board):
            return self.game_over("Congratulations! You completed the Crosswords puzzle!", reward)
        obs = f"At turn {self.turn_count}, you placed {letter} at ({row}, {col}) correctly."
        return self.ongoing(obs, reward)

    def sample_random_action(self) -> str:
        empty = [
            (r, c)
            for r, line in enumerate(self.board)
            for c, cell in enumerate(line)
            if cell == EMPTY
        ]
        row, col = self.rng.choice(empty) if empty else (0, 0)
        return f"\\boxed{{{row} {col} {self.rng.choice(string.ascii_uppercase)}}}"

    def render(self) -> str:
        """The grid: '.' a black cell, '_' a letter still to find; rows and columns from 0."""
        header = "    " + " ".join(f"C{c:02}" for c in range(len(self.board)))
        rows = [
            f"R{r:02} " + " ".join(f" {cell} " for cell in line).rstrip()
            for r, line in enumerate(self.board)
        ]
        return "\n".join([header, *rows])

    def clue_text(self) -> str:
        return "\n".join(
            f"{i}. {self.clues[word]} ({direction}, starting at row {row}, column {col}): "
            f"{len(word)} letters"
            for i, (word, (row, col, direction)) in enumerate(self.placed_words.items(), 1)
        )

    def instructions(self) -> str:
        return (
            "You are playing Crosswords.\n"
            "Each row and column of the grid is numbered from 0. The cells to fill with letters "
            "are shown as '_', and the cells that take no letter as '.'.\n"
            "Each turn you may place one letter: put the row, the column and the letter in "
            "\\boxed{row column letter}, e.g. \\boxed{0 0 d} or \\boxed{1 2 G}. Only the last "
            "such box of your response is read.\n"
            f"You have to finish the puzzle within {self.max_turns} turns.\n"
            "As you play, the history of your moves will be appended below. Use it to complete "
            "the puzzle."
        )

    def suffix(self) -> str:
        return (
            f"Current Board:\n{self.render()}\n"
            f"Here are the clues for the words you need to find:\n{self.clue_text()}\n"
            "Enter your guess."
        )
