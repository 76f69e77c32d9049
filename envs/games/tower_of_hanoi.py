"""Tower of Hanoi: move a stack of disks from tower A to tower C."""

from __future__ import annotations

import re

from gem_sandbox_envs.games.base import GameReward, Outcome, TextGame

_MOVE = re.compile(r"([ABC])\s*,?\s*([ABC])", re.IGNORECASE)


class TowerofHanoiEnv(TextGame[tuple[str, str]]):
    """Move ``num_disks`` disks from A to C, one top disk at a time, never a bigger on a smaller.

    Running out of turns earns the fraction of disks already on C, as in GEM.
    """

    action_format = r"\boxed{A C}"

    #: (num_disks, max_turns) of GEM's ``-random`` variant.
    RANDOM_SETTINGS = [(3, 10), (4, 20), (5, 35)]

    def __init__(
        self,
        num_disks: int | None = 3,
        max_turns: int | None = 100,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed, num_disks=num_disks, max_turns=max_turns)

    def new_game(self) -> None:
        # Each tower lists its disks bottom to top; disk n is the n-th smallest.
        self.towers = {"A": list(range(self.num_disks, 0, -1)), "B": [], "C": []}

    def parse_move(self, answer: str) -> tuple[str, str] | None:
        match = _MOVE.fullmatch(answer)
        return (match[1].upper(), match[2].upper()) if match else None

    def play(self, move: tuple[str, str]) -> Outcome:
        src, dst = move
        turn = f"At turn {self.turn_count}, you tried to move"
        if src == dst:
            return self.invalid(f"{turn} from tower {src} to itself.")
        if not self.towers[src]:
            return self.invalid(f"{turn} from tower {src}, which is empty.")
        if self.towers[dst] and self.towers[src][-1] > self.towers[dst][-1]:
            obs = (
                f"{turn} from tower {src} to tower {dst}, but the top disk on tower {src} "
                f"is larger than the top disk on tower {dst}."
            )
            return self.invalid(obs)
        disk = self.towers[src].pop()
        self.towers[dst].append(disk)
        if len(self.towers["C"]) == self.num_disks:
            return self.game_over(
                "Congratulations! You solved the Tower of Hanoi Puzzle.", GameReward.SUCCESS
            )
        obs = f"At turn {self.turn_count}, you moved disk {disk} from tower {src} to tower {dst}."
        return self.ongoing(obs)

    def timeout_reward(self, move: tuple[str, str], reward: float) -> float:
        return len(self.towers["C"]) / self.num_disks

    def sample_random_action(self) -> str:
        src, dst = self.rng.sample("ABC", 2)
        return f"\\boxed{{{src} {dst}}}"

    def instructions(self) -> str:
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks.\n"
            "You have to move the disks from tower A to tower C.\n"
            "To move a disk, type the source tower and the target tower (e.g., '\\boxed{A C}').\n"
            "Note that you can only move the top disk of a tower, and that a bigger disk cannot be "
            "placed on a smaller disk.\n"
            f"You have {self.max_turns} turns.\n"
            "As you play, the history of your moves will be displayed.\n"
        )

    def suffix(self) -> str:
        board = "\n".join(f"{name}: {disks}" for name, disks in self.towers.items())
        return f"Here is the current state of the tower of hanoi:\n{board}\n\nEnter your move."
