"""Iterated rock-paper-scissors: two agents move at once, GEM's parallel multi-agent mode."""

from __future__ import annotations

from typing import Any

from gem_sandbox_envs.multiagent.base import RulesFirstEnv

from gem_sandbox.multiagent import AgentSelector, MultiStepReturn
from gem_sandbox.utils.parsing import boxed_answers

P0, P1 = "player_0", "player_1"
MOVES = ("rock", "paper", "scissors")
BEATS = {"rock": "scissors", "paper": "rock", "scissors": "paper"}
WIN, LOSS, TIE = 1.0, -1.0, 0.0

#: Match lengths of the ``-random`` variant, drawn per episode.
_RANDOM_ROUNDS = (3, 5, 7)


class RockPaperScissorsEnv(RulesFirstEnv):
    """``player_0`` and ``player_1`` play ``num_rounds`` rounds, each naming ``\\boxed{rock}``,
    ``\\boxed{paper}`` or ``\\boxed{scissors}`` without seeing the other's move.

    Every round pays +1 to its winner and -1 to its loser (0 each for a tie), so an agent's
    cumulative reward is its rounds won minus rounds lost and its sign says who won the match.
    A move that is not one of the three loses the round (a tie when both are). After the last
    round both agents terminate; the infos name the match winner.
    """

    blocking = False

    def __init__(self, num_rounds: int | None = 3, seed: int | None = None) -> None:
        super().__init__(seed)
        if num_rounds is not None and num_rounds < 1:
            raise ValueError(f"num_rounds must be at least 1, not {num_rounds}")
        self.setting = num_rounds
        self.num_rounds = num_rounds or _RANDOM_ROUNDS[0]
        self.possible_agents = [P0, P1]
        self.agent_selector = AgentSelector(self.possible_agents, mode="parallel")
        self.round = 0  # rounds played
        self.score = dict.fromkeys(self.possible_agents, 0)  # rounds won
        self.history: list[dict[str, str | None]] = []

    def new_episode(self) -> None:
        self.num_rounds = self.setting or self.rng.choice(_RANDOM_ROUNDS)
        self.round = 0
        self.score = dict.fromkeys(self.possible_agents, 0)
        self.history = []

    def _process_actions(self, actions: dict[str, str]) -> MultiStepReturn:
        moves = {agent: self.parse_move(text) for agent, text in actions.items()}
        self.history.append(moves)
        self.round += 1
        (a, move_a), (b, move_b) = moves.items()
        rewards = {a: self._outcome(move_a, move_b), b: self._outcome(move_b, move_a)}
        for agent, reward in rewards.items():
            self.score[agent] += reward == WIN
        over = self.round >= self.num_rounds
        if over:
            for agent in self.agents:
                self.terminations[agent] = True
        winner = self.match_winner() if over else None
        infos: dict[str, dict[str, Any]] = {
            agent: {"round": self.round, "moves": dict(moves)} | ({"winner": winner} if over else {})
            for agent in self.agents
        }
        observations = {agent: self.observe(agent) for agent in self.agents}
        return (
            observations,
            rewards,
            dict.fromkeys(self.agents, over),
            dict.fromkeys(self.agents, False),
            infos,
        )

    @staticmethod
    def parse_move(text: str) -> str | None:
        """The last boxed answer that names a move, lower-cased; None when there is none."""
        for answer in reversed(boxed_answers(text)):
            move = answer.strip().lower()
            if move in MOVES:
                return move
        return None

    @staticmethod
    def _outcome(mine: str | None, theirs: str | None) -> float:
        if mine is None:
            return TIE if theirs is None else LOSS
        if theirs is None or BEATS[mine] == theirs:
            return WIN
        return TIE if mine == theirs else LOSS

    def match_winner(self) -> str | None:
        """The agent that won more rounds, None for a drawn match."""
        (a, won_a), (b, won_b) = self.score.items()
        return a if won_a > won_b else b if won_b > won_a else None

    def _opponent(self, agent: str) -> str:
        return P1 if agent == P0 else P0

    def observe(self, agent: str) -> str:
        """The last round's moves, the score and the prompt, from ``agent``'s side."""
        opponent = self._opponent(agent)
        lines = []
        if self.history:
            last = self.history[-1]
            result = {WIN: "you win the round", LOSS: "you lose the round", TIE: "a tie"}[
                self._outcome(last[agent], last[opponent])
            ]
            mine, theirs = last[agent] or "no valid move", last[opponent] or "no valid move"
            lines.append(f"Round {self.round}: you played {mine}, your opponent {theirs}: {result}.")
        lines.append(f"Score: you {self.score[agent]}, your opponent {self.score[opponent]}.")
        if self.round >= self.num_rounds:
            winner = self.match_winner()
            verdict = "a draw" if winner is None else "you won" if winner == agent else "you lost"
            lines.append(f"The match is over: {verdict}.")
        else:
            lines.append(
                f"Round {self.round + 1} of {self.num_rounds}: "
                "play \\boxed{rock}, \\boxed{paper} or \\boxed{scissors}."
            )
        return "\n".join(lines)

    def instructions(self) -> str:
        return (
            f"You are playing {self.num_rounds} rounds of rock-paper-scissors against another "
            "player. Each round both of you move at once: rock beats scissors, scissors beats "
            "paper, paper beats rock. A round won earns +1, a round lost -1, a tie 0; an "
            "answer that is not one of the three moves loses the round."
        )

    def sample_agent_action(self, agent: str) -> str:
        return f"\\boxed{{{self.rng.choice(MOVES)}}}"
