"""Tic-tac-toe for two agents taking turns: GEM's sequential multi-agent mode."""

from __future__ import annotations

import re

from gem_sandbox_envs.multiagent.base import RulesFirstEnv

from gem_sandbox.multiagent import AgentSelector, MultiStepReturn
from gem_sandbox.utils.parsing import boxed_answers

X, O = "player_x", "player_o"
MARKS = {X: "X", O: "O"}
WIN, LOSS, DRAW = 1.0, -1.0, 0.0

_MOVE = re.compile(r"\(?\s*(\d+)\s*[,\s]\s*(\d+)\s*\)?")
#: Every line of three cells: rows, columns, diagonals.
_LINES = (
    [[(r, c) for c in range(3)] for r in range(3)]
    + [[(r, c) for r in range(3)] for c in range(3)]
    + [[(i, i) for i in range(3)], [(i, 2 - i) for i in range(3)]]
)


class TicTacToeEnv(RulesFirstEnv):
    """``player_x`` and ``player_o`` take turns putting their mark on a 3x3 board with
    ``\\boxed{row col}`` (1-based); three in a line wins.

    Rewards come at the end: +1 to the winner, -1 to the loser, 0 each for a draw. A move that
    cannot be played (no boxed ``row col``, off the board, or on a taken cell) forfeits the
    game, scored as a loss, so that an illegal move never pays better than a legal losing one.
    Both agents observe every step: the board, and whether it is their turn.
    """

    blocking = False
    action_format = r"\boxed{2 2}"

    def __init__(self, first_player: str | None = X, seed: int | None = None) -> None:
        super().__init__(seed)
        if first_player not in (X, O, None):
            raise ValueError(
                f"first_player is {X!r}, {O!r} or None (drawn per episode), not {first_player!r}"
            )
        self.first_player = first_player
        self.possible_agents = [X, O]
        self.agent_selector = AgentSelector(self.possible_agents, mode="sequential")
        self.board: list[list[str | None]] = [[None] * 3 for _ in range(3)]
        self.winner: str | None = None
        self.over = False
        self.move_count = 0

    def new_episode(self) -> None:
        self.board = [[None] * 3 for _ in range(3)]
        self.winner, self.over, self.move_count = None, False, 0
        first = self.first_player or self.rng.choice(self.possible_agents)
        assert self.agent_selector is not None
        self.agent_selector.reinit([first, self._opponent(first)])

    def _process_actions(self, actions: dict[str, str]) -> MultiStepReturn:
        ((agent, action),) = actions.items()
        opponent, mark = self._opponent(agent), MARKS[agent]
        cell, problem = self._parse(action)
        if cell is None:
            event = f"{mark} {problem} and forfeits the game."
            return self._game_over(opponent, "illegal move", event)
        row, col = cell
        self.board[row][col] = mark
        self.move_count += 1
        played = f"{mark} played row {row + 1} col {col + 1}."
        if self._has_line(mark):
            return self._game_over(agent, "win", f"{played} {mark} has three in a line and wins.")
        if self.move_count == 9:
            return self._game_over(None, "draw", f"{played} The board is full: a draw.")
        observations = {a: f"{played}\n{self.observe(a, next_player=opponent)}" for a in self.agents}
        zeros = dict.fromkeys(self.agents, 0.0)
        falses = dict.fromkeys(self.agents, False)
        return observations, zeros, falses, dict(falses), {a: {} for a in self.agents}

    def _parse(self, action: str) -> tuple[tuple[int, int] | None, str]:
        """The empty cell (0-based) of the last boxed ``row col``, or None and what was wrong."""
        for answer in reversed(boxed_answers(action)):
            match = _MOVE.fullmatch(answer.strip())
            if match is None:
                continue
            row, col = int(match[1]), int(match[2])
            if not (1 <= row <= 3 and 1 <= col <= 3):
                return None, f"played row {row} col {col}, off the board"
            if self.board[row - 1][col - 1] is not None:
                return None, f"played row {row} col {col}, which is taken"
            return (row - 1, col - 1), ""
        return None, f"gave no move in \\boxed{{row col}} (for example {self.action_format})"

    def _game_over(self, winner: str | None, reason: str, event: str) -> MultiStepReturn:
        self.winner, self.over = winner, True
        for agent in self.agents:
            self.terminations[agent] = True
        rewards = {a: DRAW if winner is None else WIN if a == winner else LOSS for a in self.agents}
        observations = {a: f"{event}\n{self.observe(a)}" for a in self.agents}
        info = {"winner": winner, "reason": reason}
        return (
            observations,
            rewards,
            dict.fromkeys(self.agents, True),
            dict.fromkeys(self.agents, False),
            {a: dict(info) for a in self.agents},
        )

    def _has_line(self, mark: str) -> bool:
        return any(all(self.board[r][c] == mark for r, c in line) for line in _LINES)

    def _opponent(self, agent: str) -> str:
        return O if agent == X else X

    def observe(self, agent: str, next_player: str | None = None) -> str:
        """The board and ``agent``'s status; ``next_player`` is given during a step, before the
        selector passes the turn on."""
        mark = MARKS[agent]
        board = self.render()
        if self.over:
            outcome = (
                "It is a draw." if self.winner is None
                else "You won." if self.winner == agent
                else "You lost."
            )
            return f"{board}\nYou are {mark}. The game is over. {outcome}"
        if next_player is None:
            assert self.agent_selector is not None
            next_player = self.agent_selector.selected
        if next_player == agent:
            return (
                f"{board}\nYou are {mark}. Your move: put the row and column (1-3) of an empty "
                f"cell in \\boxed{{}}, for example {self.action_format}."
            )
        return f"{board}\nYou are {mark}. Waiting for {MARKS[self._opponent(agent)]} to move."

    def render(self) -> str:
        rows = [f"{r + 1}  " + " ".join(cell or "." for cell in self.board[r]) for r in range(3)]
        return "\n".join(["   1 2 3", *rows])

    def instructions(self) -> str:
        return (
            "You are playing tic-tac-toe against another player on a 3x3 board. Players take "
            "turns marking an empty cell; the first to get three marks in a row, column or "
            "diagonal wins. An illegal move (an occupied or off-board cell, or no move) loses "
            "the game."
        )

    def sample_agent_action(self, agent: str) -> str:
        """A random empty cell."""
        empty = [(r, c) for r in range(3) for c in range(3) if self.board[r][c] is None]
        row, col = self.rng.choice(empty)
        return f"\\boxed{{{row + 1} {col + 1}}}"
