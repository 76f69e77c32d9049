"""Minesweeper: reveal every safe cell without touching a mine."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame

_MOVE = re.compile(r"([a-zA-Z]+)\s+(\d+)\s+(\d+)")

Cell = tuple[int, int]


class MinesweeperEnv(TextGame[tuple[str, int, int]]):
    """Reveal or flag cells of a ``rows`` x ``cols`` board hiding ``num_mines`` mines.

    Mines are laid on the first reveal, away from that cell and its neighbours, so the first
    reveal is always safe and opens an area. Each reveal earns the fraction of safe cells it
    uncovers (a won game returns 1.0 in total); revealing a mine ends the game with nothing.
    The board is Markovian, so observations only report the move and ``info["suffix"]``
    carries the board, as in GEM.
    """

    action_format = r"\boxed{reveal 3 2}"

    def __init__(
        self,
        rows: int | None = 8,
        cols: int | None = 8,
        num_mines: int | None = 10,
        max_turns: int | None = 20,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, rows=rows, cols=cols, num_mines=num_mines, max_turns=max_turns)

    def new_game(self) -> None:
        self.mines: set[Cell] = set()  # laid on the first reveal
        self.revealed: set[Cell] = set()
        self.flags: set[Cell] = set()

    def random_settings(self) -> tuple[int, int, int, int]:
        """GEM's ``-random`` boards: 5x5 to 8x8, a fifth of them mines, a turn per cell."""
        size = self.rng.randint(5, 8)
        return size, size, size * size // 5, size * size

    def parse_move(self, answer: str) -> tuple[str, int, int] | None:
        match = _MOVE.fullmatch(answer)
        if match is None:
            return None
        return match[1].lower(), int(match[2]), int(match[3])

    def play(self, move: tuple[str, int, int]) -> Outcome:
        command, row, col = move
        cell = (row, col)
        turn = f"At turn {self.turn_count}, you chose"
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            obs = f"{turn} cell ({row}, {col}), which is outside the bounds of the grid."
            return self.invalid(obs)
        if command == "flag":
            if cell in self.revealed:
                obs = f"{turn} to flag cell ({row}, {col}), which has already been revealed."
                return self.invalid(obs)
            if cell in self.flags:
                self.flags.remove(cell)
                action = "removed"
            else:
                self.flags.add(cell)
                action = "added"
            obs = f"At turn {self.turn_count}, you {action} a flag on cell ({row}, {col})."
            return self.ongoing(obs)
        if command != "reveal":
            obs = f"{turn} an invalid action '{command}'. Valid actions are 'reveal' or 'flag'."
            return self.invalid(obs)
        if cell in self.revealed or cell in self.flags:
            state = "revealed" if cell in self.revealed else "flagged"
            obs = f"{turn} to reveal cell ({row}, {col}), which has already been {state}."
            return self.invalid(obs)
        if not self.mines:
            self._lay_mines(cell)
        if cell in self.mines:
            self.revealed.add(cell)
            return self.game_over(f"Game over! You hit a mine at ({row}, {col}).", GameReward.FAIL)
        reward = self._reveal(cell) / (self.rows * self.cols - self.num_mines)
        if len(self.revealed) == self.rows * self.cols - self.num_mines:
            return self.game_over(
                "Congratulations! You have successfully cleared the Minesweeper board.", reward
            )
        return self.ongoing(
            f"At turn {self.turn_count}, you successfully revealed cell ({row}, {col}).", reward
        )

    def _lay_mines(self, first: Cell) -> None:
        allowed = [
            cell
            for cell in self._cells()
            if max(abs(cell[0] - first[0]), abs(cell[1] - first[1])) > 1
        ]
        self.mines = set(self.rng.sample(allowed, self.num_mines))

    def _reveal(self, start: Cell) -> int:
        """Reveal ``start`` and flood-fill from cells with no adjacent mine; count the new cells."""
        queue = deque([start])
        self.revealed.add(start)
        count = 1
        while queue:
            cell = queue.popleft()
            if self.adjacent_mines(cell):
                continue
            for neighbour in self._neighbours(cell):
                if neighbour not in self.revealed and neighbour not in self.flags:
                    self.revealed.add(neighbour)
                    count += 1
                    queue.append(neighbour)
        return count

    def adjacent_mines(self, cell: Cell) -> int:
        return sum(neighbour in self.mines for neighbour in self._neighbours(cell))

    def _neighbours(self, cell: Cell) -> Iterator[Cell]:
        row, col = cell
        for r in range(max(row - 1, 0), min(row + 2, self.rows)):
            for c in range(max(col - 1, 0), min(col + 2, self.cols)):
                if (r, c) != cell:
                    yield r, c

    def _cells(self) -> Iterator[Cell]:
        return ((r, c) for r in range(self.rows) for c in range(self.cols))

    def sample_random_action(self) -> str:
        command = self.rng.choice(["reveal"] * 9 + ["flag"])
        row, col = self._random_cell()
        return f"\\boxed{{{command} {row} {col}}}"

    def _random_cell(self) -> Cell:
        return self.rng.randrange(self.rows), self.rng.randrange(self.cols)

    def render(self) -> str:
        """The board: '.' hidden, 'F' flagged, '*' a revealed mine, digits count adjacent mines."""
        lines = ["   " + " ".join(f"{c:2}" for c in range(self.cols))]
        for r in range(self.rows):
            cells = "".join(f" {self._symbol((r, c))} " for c in range(self.cols))
            lines.append(f"{r:2} {cells}")
        return "\n".join(lines)

    def _symbol(self, cell: Cell) -> str:
        if cell in self.revealed:
            return "*" if cell in self.mines else str(self.adjacent_mines(cell))
        return "F" if cell in self.flags else "."

    def instructions(self) -> str:
        (rr, rc), (fr, fc) = self._random_cell(), self._random_cell()
        return (
            "You are playing the Minesweeper game.\n"
            "The objective of the game is to reveal all cells that do not contain mines.\n"
            "To make a move, you can either reveal a cell or place a flag on a suspected mine "
            "location using one of the following commands:\n"
            "- 'reveal': Reveal the contents of a specific cell.\n"
            "- 'flag': Place or remove a flag on a specific cell to mark it as a potential mine.\n"
            "To submit your move, type the command followed by the row and column in \\boxed{}.\n"
            "Rows and columns are numbered from 0.\n"
            "For example:\n"
            f"- \\boxed{{reveal {rr} {rc}}} to reveal the cell in Row {rr}, Column {rc}.\n"
            f"- \\boxed{{flag {fr} {fc}}} to place or remove a flag on the cell "
            f"in Row {fr}, Column {fc}.\n"
            "The current board layout is shown below. Cells that are unrevealed are represented by "
            "a dot ('.'), revealed numbers show the count of adjacent mines, and flagged cells are "
            "marked with an 'F'.\n"
            "Use logic and deduction to avoid revealing cells with mines!\n"
            "Be mindful not to choose revealed or flagged cells.\n"
        )

    def suffix(self) -> str:
        return f"Here is the current board layout:\n{self.render()}\nEnter your guess."
