"""Words laid along the lines of a letter grid, as Crosswords and WordSearch place them."""

from __future__ import annotations

Cell = tuple[int, int]
#: (row, column, direction) of a word's first letter.
Placement = tuple[int, int, str]

DIRECTIONS: dict[str, Cell] = {"across": (0, 1), "down": (1, 0)}


def cells(word: str, placement: Placement) -> list[Cell]:
    """The cells ``word`` covers when placed at ``placement``, first letter first."""
    row, col, direction = placement
    d_row, d_col = DIRECTIONS[direction]
    return [(row + i * d_row, col + i * d_col) for i in range(len(word))]


class Layout:
    """The words placed so far on a ``size`` x ``size`` grid: their placements, the letter in
    each cell they cover and the directions of the words through each cell."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.placements: dict[str, Placement] = {}
        self.letters: dict[Cell, str] = {}
        self.owners: dict[Cell, set[str]] = {}

    def place(self, word: str, placement: Placement) -> None:
        self.placements[word] = placement
        for cell, letter in zip(cells(word, placement), word):
            self.letters[cell] = letter
            self.owners.setdefault(cell, set()).add(placement[2])

    def agrees(self, word: str, placement: Placement) -> bool:
        """Inside the grid, and any letter it shares is the same letter of a word running the
        other way (so no word hides inside another)."""
        for cell, letter in zip(cells(word, placement), word):
            if not (0 <= cell[0] < self.size and 0 <= cell[1] < self.size):
                return False
            if cell in self.letters and (
                self.letters[cell] != letter or placement[2] in self.owners[cell]
            ):
                return False
        return True
