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
