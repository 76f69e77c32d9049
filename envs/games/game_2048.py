"""2048: slide and merge tiles until one reaches the target."""

from __future__ import annotations

import math

from gem_sandbox_envs.games.base import Outcome, TextGame

Board = list[list[int]]  # 0 marks an empty cell

DIRECTIONS = ("up", "down", "left", "right")


def _merge_left(line: list[int]) -> list[int]:
    """Slide one line to the left, merging each pair of equal neighbours once."""
    tiles = [tile for tile in line if tile]
    merged: list[int] = []
    while tiles:
        if len(tiles) > 1 and tiles[0] == tiles[1]:
            merged.append(2 * tiles[0])
            del tiles[:2]
        else:
            merged.append(tiles.pop(0))
    return merged + [0] * (len(line) - len(merged))


def slide(board: Board, direction: str) -> Board:
    """The board after sliding every tile towards ``direction`` (no new tile added)."""
    if direction in ("up", "down"):
        columns = [list(column) for column in zip(*board)]
        return [list(row) for row in zip(*slide(columns, "left" if direction == "up" else "right"))]
    if direction == "right":
        return [_merge_left(row[::-1])[::-1] for row in board]
    return [_merge_left(row) for row in board]


class Game2048Env(TextGame[str]):
    """Reach ``target_tile`` on a ``board_size`` x ``board_size`` board within ``max_turns``.

    Each new highest tile earns its progress towards the target on a log2 scale (GEM's
    milestone reward), so reaching the target returns 1.0 in total. A move that changes
    nothing is invalid; a board with no move left ends the game.
    """

    action_format = r"\boxed{left}"

    #: (target_tile, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(16, 20), (32, 30), (64, 50)]

    def __init__(
        self,
        target_tile: int | None = 2048,
        max_turns: int | None = 1000,
        board_size: int = 4,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, target_tile=target_tile, max_turns=max_turns)
        self.board_size = board_size

    def new_game(self) -> None:
        self.board: Board = [[0] * self.board_size for _ in range(self.board_size)]
        self._add_tile()
        self._add_tile()
        self.start_tile = self.best_tile = self.max_tile()

    def max_tile(self) -> int:
        return max(map(max, self.board))

    def _add_tile(self) -> None:
        """Put a 2 (90%) or a 4 (10%) in a random empty cell."""
        empty = [
            (r, c) for r, row in enumerate(self.board) for c, tile in enumerate(row) if not tile
        ]
        r, c = self.rng.choice(empty)
        self.board[r][c] = 2 if self.rng.random() < 0.9 else 4

    def parse_move(self, answer: str) -> str | None:
        move = answer.lower()
        return move if move in DIRECTIONS else None

    def play(self, move: str) -> Outcome:
        board = slide(self.board, move)
        if board == self.board:
            obs = (
                f"At turn {self.turn_count}, you chose move '{move}' which doesn't change the "
                "board state. Try a different direction."
            )
            return self.invalid(obs)
        self.board = board
        reward = self._progress_reward()
        self._add_tile()
        if self.best_tile >= self.target_tile:
            return self.game_over(
                f"Congratulations! You reached the {self.target_tile} tile "
                f"in {self.turn_count} turns!",
                reward,
            )
        if all(slide(self.board, d) == self.board for d in DIRECTIONS):
            return self.game_over("Game over! No more moves possible.", reward)
        return self.ongoing(f"At turn {self.turn_count}, you moved {move}.", reward)

    def _progress_reward(self) -> float:
        """The log2 progress of a new highest tile (capped at the target) since the start."""
        tile = min(self.max_tile(), self.target_tile)
        if tile <= self.best_tile:
            return 0.0
        progress = math.log2(tile / self.best_tile) / math.log2(self.target_tile / self.start_tile)
        self.best_tile = tile
        return progress

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(DIRECTIONS)}}}"

    def render(self) -> str:
        return "\n".join(
            " ".join(f"{tile:4d}" if tile else "   ." for tile in row) for row in self.board
        )

    def instructions(self) -> str:
        return (
            "You are playing 2048.\n"
            f"Your goal is to reach the {self.target_tile} tile by sliding and merging tiles.\n"
            f"You have {self.max_turns} turns maximum.\n\n"
            "Rules:\n"
            "- When two tiles with the same number touch, they merge into one tile with "
            "double the value.\n"
            "- After each move, a new tile (2 or 4) appears in a random empty spot.\n"
            "- You can move tiles in four directions: 'up', 'down', 'left', 'right'.\n\n"
            "To submit your move, type the direction in \\boxed{...}.\n"
            f"For example: {self.sample_random_action()}\n\n"
        )

    def suffix(self) -> str:
        return f"Current board:\n{self.render()}\nEnter your move."
