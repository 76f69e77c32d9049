"""Scripted policies and process checks the trainer-adapter tests share.

A policy here reads only the text a trainer would show its model and answers as a model
would, so a reward it earns came from the env (and, for the math episode, from the number a
sandbox printed), not from the test knowing the answer.
"""

from __future__ import annotations

import re
import time

from gem_sandbox.sandbox.backends.local import bwrap_processes

MATH_ID = "math:Arithmetic-v0"
MATH_SEED = 3  # "What is the remainder when 77^9016 is divided by 2143?"
GAME_ID = "game:GuessTheNumber-v0"


class Guesser:
    """Binary search on GuessTheNumber's hints (1..20), one ``\\boxed{}`` guess per turn."""

    def __init__(self, low: int = 1, high: int = 20) -> None:
        self.low, self.high, self.last = low, high, None

    def __call__(self, observation: str) -> str:
        hints = re.findall(r"guessed (\d+), and the target number is (higher|lower)", observation)
        if hints:
            guess, way = int(hints[-1][0]), hints[-1][1]
            if way == "higher":
                self.low = max(self.low, guess + 1)
            else:
                self.high = min(self.high, guess - 1)
        self.last = (self.low + self.high) // 2
        return f"I guess \\boxed{{{self.last}}}"


def math_with_tool(observation: str) -> str:
    """Turn one: compute the modular power in a ``<python>`` call. Turn two: box what the
    sandbox printed."""
    printed = re.findall(r"Code execution result: (-?\d+)", observation)
    if printed:
        return f"The answer is \\boxed{{{printed[-1]}}}."
    base, power, modulus = re.search(r"(\d+)\^(\d+) is divided by (\d+)", observation).groups()
    return f"<python>print(pow({base}, {power}, {modulus}))</python>"


def sandboxes_of(pid: int) -> set[str]:
    """The bubblewrap sandboxes whose launcher is a child of ``pid``."""
    return {p.box for p in bwrap_processes() if p.ppid == pid}


def wait_gone(boxes: set[str], within: float = 30.0) -> set[str]:
    """Those of ``boxes`` still running after at most ``within`` seconds."""
    deadline = time.monotonic() + within
    while (left := boxes & {p.box for p in bwrap_processes()}) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
