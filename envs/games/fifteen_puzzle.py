"""The sliding puzzle (15-puzzle and its 3-, 8- and 24- siblings)."""

from __future__ import annotations

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame

BLANK = 0

#: Where the tile that slides comes from, relative to the blank, for each move.
MOVES = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}

#: How a board is drawn: uniformly among the solvable ones, or by random slides (GEM's names).
INIT_ALGOS = ("pure_random", "monte_carlo")


def is_solvable(tiles: list[int], width: int) -> bool:
    """Whether the row-major ``tiles`` can be slid into order with the blank last.

    Each move keeps the parity of (inversions + the blank's row, counted from the bottom, when
    the width is even), and the goal has zero inversions.
    """
    numbers = [tile for tile in tiles if tile != BLANK]
    inversions = sum(a > b for i, a in enumerate(numbers) for b in numbers[i + 1 :])
    if width % 2:
        return inversions % 2 == 0
    blank_row_from_bottom = width - tiles.index(BLANK) // width
    return (inversions + blank_row_from_bottom) % 2 == 1


class FifteenPuzzleEnv(TextGame[str]):
    """Slide tiles into the blank of a ``num_rows`` x ``num_rows`` board until they are in order.

    Boards are drawn uniformly among the solvable, unsolved ones (``init_algo="pure_random"``,
    gem-llm 0.1.0's way), or, with GEM's newer ``init_algo="monte_carlo"``, by ``mc_rand_moves``
    random slides from the solved board that never undo the previous one (easier boards;
    redrawn in the rare case that they end solved). Running out of turns earns the fraction of
    squares (blank included) already in place, as in GEM.
    """

    action_format = r"\boxed{up}"

    #: (num_rows, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(2, 10), (3, 20), (4, 50)]

    def __init__(
        self,
        max_turns: int | None = 20,
        num_rows: int | None = 2,
        init_algo: str = "pure_random",
        mc_rand_moves: int = 100,
        seed: int | None = None,
    ) -> None:
        if init_algo not in INIT_ALGOS:
            raise ValueError(f"init_algo is one of {', '.join(INIT_ALGOS)}, got {init_algo!r}")
        if mc_rand_moves < 1:
            raise ValueError(f"mc_rand_moves must be at least 1, got {mc_rand_moves}")
        super().__init__(seed, num_rows=num_rows, max_turns=max_turns)
        self.init_algo = init_algo
        self.mc_rand_moves = mc_rand_moves

    @property
    def greatest_num(self) -> int:
        return self.num_rows**2 - 1

    def new_game(self) -> None:
        tiles = self._goal()
        if self.init_algo == "monte_carlo":
            while tiles == self._goal():
                tiles = self._random_walk()
        while tiles == self._goal() or not is_solvable(tiles, self.num_rows):
            self.rng.shuffle(tiles)
        self.tiles = tiles  # row-major

    def _random_walk(self) -> list[int]:
        """The solved board after ``mc_rand_moves`` random slides, none undoing the last."""
        width, tiles, came_from = self.num_rows, self._goal(), None
        for _ in range(self.mc_rand_moves):
            blank = tiles.index(BLANK)
            sources = [
                tile
                for row, col in ((blank // width + dr, blank % width + dc) for dr, dc in MOVES.values())
                if 0 <= row < width and 0 <= col < width and (tile := row * width + col) != came_from
            ]
            tile = self.rng.choice(sources)
            tiles[blank], tiles[tile] = tiles[tile], BLANK
            came_from = blank
        return tiles

    def _goal(self) -> list[int]:
        return [*range(1, self.greatest_num + 1), BLANK]

    def parse_move(self, answer: str) -> str | None:
        move = answer.lower()
        return move if move in MOVES else None

    def play(self, move: str) -> Outcome:
        width = self.num_rows
        blank = self.tiles.index(BLANK)
        d_row, d_col = MOVES[move]
        row, col = blank // width + d_row, blank % width + d_col
        if not (0 <= row < width and 0 <= col < width):
            obs = (
                f"At turn {self.turn_count}, you chose a move {move} that is outside the bounds "
                "of the board."
            )
            return self.invalid(obs)
        tile = row * width + col
        self.tiles[blank], self.tiles[tile] = self.tiles[tile], BLANK
        if self.tiles == self._goal():
            obs = "Congratulations! You have solved the puzzle!"
            return self.game_over(obs, GameReward.SUCCESS)
        return self.ongoing(f"At turn {self.turn_count}, you made a valid move: {move}.")

    def timeout_reward(self, move: str, reward: float) -> float:
        in_place = sum(tile == goal for tile, goal in zip(self.tiles, self._goal()))
        return reward + in_place / len(self.tiles)

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(list(MOVES))}}}"

    def render(self) -> str:
        width = self.num_rows
        rows = [self.tiles[i : i + width] for i in range(0, len(self.tiles), width)]
        return "\n".join(" ".join("__" if t == BLANK else f"{t:2}" for t in row) for row in rows)

    def instructions(self) -> str:
        n = self.greatest_num
        return (
            f"You are playing the {n}-Puzzle game.\n"
            f"You have to arrange the numbered tiles in ascending order from 1 to {n}, "
            "with the empty space located in the bottom-right corner.\n"
            "To make a move, you can slide a tile into the empty space (represented by a double "
            "underscore, e.g. __) by using one of the following commands:\n"
            "- 'up': Move the tile below the empty space up.\n"
            "- 'down': Move the tile above the empty space down.\n"
            "- 'left': Move the tile to the right of the empty space left.\n"
            "- 'right': Move the tile to the left of the empty space right.\n"
            "To submit your move, type the direction (e.g., 'up', 'down', 'left', or 'right') in "
            "\\boxed{...}.\n"
            f"You have {self.max_turns} turns.\n"
            "The current board layout is shown below.\n"
            "Use logic and planning to solve the puzzle.\n"
        )

    def suffix(self) -> str:
        return f"Here is the current board layout: \n{self.render()}\n\nEnter your move."
