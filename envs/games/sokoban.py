"""Sokoban: push every box onto a goal square."""

from __future__ import annotations

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame

Cell = tuple[int, int]

#: The step each move takes, as (row, column) offsets.
MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}

_ROOM_ATTEMPTS = 200  # room layouts tried before falling back to a plain one
_WALKS_PER_ROOM = 12  # reverse-play walks from the solved state of each layout
_TURN_PROBABILITY = 0.35  # how often the carving walk changes direction
#: What the carving walk digs around each cell it visits: a bar, a corner or a block.
_SHAPES: list[list[Cell]] = [
    [(0, -1), (0, 0), (0, 1)],
    [(-1, 0), (0, 0), (1, 0)],
    [(0, -1), (0, 0), (1, 0)],
    [(0, 1), (0, 0), (1, 0)],
    [(0, -1), (0, 0), (1, -1), (1, 0)],
]


def _step(cell: Cell, move: Cell, times: int = 1) -> Cell:
    return cell[0] + times * move[0], cell[1] + times * move[1]


class SokobanEnv(TextGame[str]):
    """Push ``num_boxes`` boxes onto as many goals in a ``dim_room`` room within ``max_turns``.

    Levels are made backwards, as in GEM (gym-sokoban): carve a room with a random walk, put the
    boxes on their goals, then walk the player around pulling boxes. Every pull undoes a push,
    so each level is solvable, and a walk no longer than ``max_turns`` bounds the moves it
    needs; a level is only kept once no box is left on a goal. Running out of turns earns the
    share of boxes on goals, as in GEM.
    """

    action_format = r"\boxed{up}"

    #: (dim_room, num_boxes, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [((6, 6), 2, 20), ((8, 8), 5, 50)]

    def __init__(
        self,
        dim_room: tuple[int, int] | None = (6, 6),
        max_turns: int | None = 100,
        num_boxes: int | None = 3,
        seed: int | None = None,
    ) -> None:
        room = None if dim_room is None else (int(dim_room[0]), int(dim_room[1]))
        super().__init__(seed, dim_room=room, num_boxes=num_boxes, max_turns=max_turns)

    def new_game(self) -> None:
        self.rows, self.cols = self.dim_room
        for _ in range(_ROOM_ATTEMPTS):
            if self._generate():
                return
        self._plain_room()

    # -- level generation ----------------------------------------------------------------
    def _generate(self) -> bool:
        """Carve a room and reverse-play a level in it; False when this room yields none."""
        floor = self._carve()
        if len(floor) < 3 * self.num_boxes + 1:  # too cramped to move every box off a goal
            return False
        cells = sorted(floor)
        goals = self.rng.sample(cells, self.num_boxes)
        player = self.rng.choice([cell for cell in cells if cell not in goals])
        best: tuple[int, frozenset[Cell], Cell] | None = None
        for _ in range(_WALKS_PER_ROOM):
            found = self._reverse_walk(floor, goals, player)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        if best is None:
            return False
        _, boxes, player = best
        self.walls = {
            (r, c) for r in range(self.rows) for c in range(self.cols) if (r, c) not in floor
        }
        self.goals, self.boxes, self.player = set(goals), set(boxes), player
        return True

    def _carve(self) -> set[Cell]:
        """Floor cells dug by a random walk inside the outer wall, a small shape at a time."""
        if self.rows < 3 or self.cols < 3:
            return set()
        steps = int(1.7 * (self.rows + self.cols))  # GEM's walk length
        cell = (self.rng.randint(1, self.rows - 2), self.rng.randint(1, self.cols - 2))
        direction = self.rng.choice(list(MOVES.values()))
        floor: set[Cell] = set()
        for _ in range(steps):
            if self.rng.random() < _TURN_PROBABILITY:
                direction = self.rng.choice(list(MOVES.values()))
            row, col = _step(cell, direction)
            cell = (min(max(row, 1), self.rows - 2), min(max(col, 1), self.cols - 2))
            for offset in self.rng.choice(_SHAPES):
                r, c = _step(cell, offset)
                if 1 <= r <= self.rows - 2 and 1 <= c <= self.cols - 2:
                    floor.add((r, c))
        return floor

    def _reverse_walk(
        self, floor: set[Cell], goals: list[Cell], player: Cell
    ) -> tuple[int, frozenset[Cell], Cell] | None:
        """Walk up to ``max_turns`` steps from the solved state, pulling boxes along.

        Returns the best state passed with no box on a goal, scored like gym-sokoban: how often
        the pulled box changed times how far the boxes moved from their goals.
        """
        origin = {goal: goal for goal in goals}  # box position -> the goal it started on
        boxes = set(goals)
        last_pulled: Cell | None = None
        switches = 0
        best: tuple[int, frozenset[Cell], Cell] | None = None
        for _ in range(self.max_turns):
            moves = [
                move
                for move in MOVES.values()
                if _step(player, move) in floor and _step(player, move) not in boxes
            ]
            if not moves:
                break
            move = self.rng.choice(moves)
            behind = _step(player, move, -1)
            if behind in boxes:  # the player pulls the box it walks away from, as in GEM
                boxes.remove(behind)
                boxes.add(player)
                start = origin.pop(behind)
                origin[player] = start
                if start != last_pulled:
                    switches += 1
                    last_pulled = start
            player = _step(player, move)
            if boxes.isdisjoint(goals):
                moved = sum(abs(b[0] - g[0]) + abs(b[1] - g[1]) for b, g in origin.items())
                score = switches * moved
                if best is None or score > best[0]:
                    best = (score, frozenset(boxes), player)
        return best

    def _plain_room(self) -> None:
        """A level that always works: an open room, the boxes in a column, each one push from
        its goal. Only reached if every carved room failed."""
        if self.rows < 3 + max(self.num_boxes - 1, 0) or self.cols < 5:
            raise ValueError(
                f"a {self.rows}x{self.cols} room cannot hold {self.num_boxes} boxes"
            )
        self.walls = {
            (r, c)
            for r in range(self.rows)
            for c in range(self.cols)
            if r in (0, self.rows - 1) or c in (0, self.cols - 1)
        }
        self.boxes = {(1 + i, 2) for i in range(self.num_boxes)}
        self.goals = {(1 + i, 3) for i in range(self.num_boxes)}
        self.player = (1, 1)

    # -- play ----------------------------------------------------------------------------
    def parse_move(self, answer: str) -> str | None:
        move = answer.lower()
        return move if move in MOVES else None

    def _free(self, cell: Cell) -> bool:
        row, col = cell
        inside = 0 <= row < self.rows and 0 <= col < self.cols
        return inside and cell not in self.walls and cell not in self.boxes

    def play(self, move: str) -> Outcome:
        offset = MOVES[move]
        target = _step(self.player, offset)
        pushed = target in self.boxes
        if not (self._free(_step(target, offset)) if pushed else self._free(target)):
            obs = (
                f"At turn {self.turn_count}, you cannot move {move}: you would walk into a wall "
                "or push a box into a wall or another box."
            )
            return self.invalid(obs)
        if pushed:
            self.boxes.remove(target)
            self.boxes.add(_step(target, offset))
        self.player = target
        if self.boxes == self.goals:
            return self.game_over(
                "Congratulations! You have solved the Sokoban puzzle!", GameReward.SUCCESS
            )
        pushing = "pushed a box while you " if pushed else ""
        return self.ongoing(f"At turn {self.turn_count}, you {pushing}moved {move}.")

    def boxes_on_goals(self) -> int:
        return len(self.boxes & self.goals)

    def timeout_reward(self, move: str, reward: float) -> float:
        return GameReward.SUCCESS * self.boxes_on_goals() / self.num_boxes

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(list(MOVES))}}}"

    def render(self) -> str:
        """GEM's symbols, one space between cells; 'S' is the player standing on a goal."""
        return "\n".join(
            " ".join(self._symbol((r, c)) for c in range(self.cols)) for r in range(self.rows)
        )

    def _symbol(self, cell: Cell) -> str:
        if cell in self.walls:
            return "#"
        if cell == self.player:
            return "S" if cell in self.goals else "P"
        if cell in self.boxes:
            return "√" if cell in self.goals else "X"
        return "O" if cell in self.goals else "_"

    def instructions(self) -> str:
        example = self.sample_random_action()
        direction = example[len("\\boxed{") : -1]
        return (
            "You are solving the Sokoban puzzle. You are the player and you need to push all "
            "boxes onto the goals.\n"
            "Walking into a box pushes it one square in the same direction.\n"
            "A box cannot be pushed into a wall or another box, and boxes cannot be pulled.\n"
            f"You have to complete the puzzle within {self.max_turns} turns.\n"
            "On the board, objects are represented as:\n"
            "- The player (you) appears as 'P' ('S' when standing on a goal)\n"
            "- Walls are represented with '#'\n"
            "- Boxes are marked as 'X'\n"
            "- Empty goals are shown with 'O'\n"
            "- Boxes on goals are visualized with '√'\n"
            "- Empty floor is shown as '_'\n\n"
            "To submit your move, type the direction (up, down, left or right) in \\boxed{}.\n"
            f"For example: {example} to move {direction}.\n"
            "Use logic and planning to push every box onto a goal!"
        )

    def suffix(self) -> str:
        return f"Here is the current board layout:\n{self.render()}\nEnter your move."
