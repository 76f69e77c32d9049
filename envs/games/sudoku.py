"""Sudoku: fill a grid with a unique solution, one digit per move."""

from __future__ import annotations

import math
import random
import re

from gem_sandbox_envs.games.base import Outcome, TextGame

_MOVE = re.compile(r"(\d+)\s+(\d+)\s+(\d+)")

Grid = list[list[int]]  # 0 marks an empty cell


def candidates(grid: Grid, row: int, col: int) -> list[int]:
    """The digits that ``grid[row][col]`` may hold without repeating one in its row, column or "
    "box."""
    size = len(grid)
    box = math.isqrt(size)
    top, left = row - row % box, col - col % box
    used = set(grid[row]) | {grid[r][col] for r in range(size)}
    used |= {grid[r][c] for r in range(top, top + box) for c in range(left, left + box)}
    return [digit for digit in range(1, size + 1) if digit not in used]


def count_solutions(grid: Grid, limit: int = 2) -> int:
    """How many ways ``grid`` can be completed, counting no further than ``limit``.

    ``grid`` is searched in place and left as it was.
    """
    empty = _most_constrained_empty_cell(grid)
    if empty is None:
        return 1
    row, col = empty
    found = 0
    for digit in candidates(grid, row, col):
        grid[row][col] = digit
        found += count_solutions(grid, limit - found)
        grid[row][col] = 0
        if found >= limit:
            break
    return found


def _fill(grid: Grid, rng: random.Random) -> bool:
    """Complete ``grid`` in place with randomly ordered digits; False if it cannot be."""
    empty = _most_constrained_empty_cell(grid)
    if empty is None:
        return True
    row, col = empty
    digits = candidates(grid, row, col)
    rng.shuffle(digits)
    for digit in digits:
        grid[row][col] = digit
        if _fill(grid, rng):
            return True
    grid[row][col] = 0
    return False


def _most_constrained_empty_cell(grid: Grid) -> tuple[int, int] | None:
    empty = [(r, c) for r, line in enumerate(grid) for c, value in enumerate(line) if value == 0]
    return min(empty, key=lambda cell: len(candidates(grid, *cell)), default=None)


class SudokuEnv(TextGame[tuple[int, int, int]]):
    """Fill a ``scale`` x ``scale`` Sudoku (4 or 9) that keeps at least ``clues`` given digits.

    The puzzle always has exactly one solution, and a move must place that solution's digit
    (GEM's rule); each correct placement earns ``1 / empty cells``, so a solved puzzle returns
    1.0 in total.
    """

    action_format = r"\boxed{1 1 5}"

    #: (scale, clues, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(4, 10, 15), (9, 50, 50)]

    def __init__(
        self,
        clues: int | None = 30,
        max_turns: int | None = 100,
        scale: int | None = 9,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, scale=scale, clues=clues, max_turns=max_turns)

    def new_game(self) -> None:
        self.solution: Grid = [[0] * self.scale for _ in range(self.scale)]
        _fill(self.solution, self.rng)
        self.board = self._dig_puzzle()
        self.num_empty = sum(row.count(0) for row in self.board)

    def _dig_puzzle(self) -> Grid:
        """Empty random cells of the solution while it stays the only one, keeping ``clues``."""
        puzzle = [row[:] for row in self.solution]
        cells = [(r, c) for r in range(self.scale) for c in range(self.scale)]
        self.rng.shuffle(cells)
        to_empty = self.scale**2 - self.clues
        for row, col in cells:
            if to_empty <= 0:
                break
            puzzle[row][col] = 0
            if count_solutions(puzzle) == 1:
                to_empty -= 1
            else:
                puzzle[row][col] = self.solution[row][col]
        return puzzle

    def parse_move(self, answer: str) -> tuple[int, int, int] | None:
        match = _MOVE.fullmatch(answer)
        return (int(match[1]), int(match[2]), int(match[3])) if match else None

    def play(self, move: tuple[int, int, int]) -> Outcome:
        row, col, digit = move
        turn = f"At turn {self.turn_count}, you tried to place {digit} at R{row} C{col}"
        if not all(1 <= value <= self.scale for value in move):
            return self.invalid(f"{turn}, which is out of bounds.")
        if self.board[row - 1][col - 1]:
            obs = f"{turn}, which is already filled. You cannot overwrite filled cells."
            return self.invalid(obs)
        if self.solution[row - 1][col - 1] != digit:
            return self.invalid(f"{turn}, which is incorrect.")
        self.board[row - 1][col - 1] = digit
        reward = 1 / self.num_empty
        if self.board == self.solution:
            return self.game_over("Congratulations! You have completed the Sudoku puzzle!", reward)
        return self.ongoing(
            f"At turn {self.turn_count}, you placed {digit} at R{row} C{col}, which is correct.",
            reward,
        )

    def sample_random_action(self) -> str:
        row, col, digit = (self.rng.randint(1, self.scale) for _ in range(3))
        return f"\\boxed{{{row} {col} {digit}}}"

    def render(self) -> str:
        box = math.isqrt(self.scale)
        header = "   " + " ".join(
            f"C{c + 1}" + ("  " if (c + 1) % box == 0 else "") for c in range(self.scale)
        )
        lines = [header.rstrip()]
        for r, row in enumerate(self.board):
            cells = ""
            for c, value in enumerate(row):
                cells += f" {value or '.'} "
                if (c + 1) % box == 0 and c < self.scale - 1:
                    cells += "| "
            lines.append(f"R{r + 1} {cells}".rstrip())
            if (r + 1) % box == 0 and r < self.scale - 1:
                lines.append("   " + "- " * 2 * (self.scale - 1))
        return "\n".join(lines)

    def instructions(self) -> str:
        n, box = self.scale, math.isqrt(self.scale)
        return (
            f"You are playing {'a simple version of ' if n == 4 else ''}Sudoku.\n"
            f"Each row is numbered from 1 to {n}, and each column is also numbered from 1 to {n}.\n"
            "Empty cells are represented by '.', "
            f"and pre-filled cells contain digits from 1 to {n}.\n\n"
            f"Your objective is to fill the empty cells in the {n}x{n} grid "
            f"with digits from 1 to {n} such that:\n"
            f"1. Each row contains all digits from 1 to {n} without repetition.\n"
            f"2. Each column contains all digits from 1 to {n} without repetition.\n"
            f"3. Each of the {n} {box}x{box} subgrids contains all digits from 1 to {n} "
            "without repetition.\n\n"
            "Rules and Instructions:\n"
            "1. **Do not overwrite** the initial numbers provided in the grid.\n"
            "2. **Only fill** empty cells represented by '.'.\n"
            "3. You may respond in any manner you prefer, but ensure that your response includes "
            "the format of '\\boxed{row column number}', e.g. \\boxed{1 1 5}.\n"
            "4. **Ensure** that your move does not violate Sudoku rules. Invalid moves, "
            "including overwriting pre-filled cells and placing a wrong digit, "
            "earn nothing and waste a turn.\n"
            f"You have {self.max_turns} turns.\n"
            "The history of your moves will be appended as you play more rounds. "
            "Use the history of your move to improve your decision making "
            "by avoiding the moves you have tried. Good luck!\n\n"
        )

    def suffix(self) -> str:
        return f"Here is the current board layout:\n{self.render()}\nEnter your move."
