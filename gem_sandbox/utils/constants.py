"""GEM's shared constants (``gem.utils.constants``) that envs and trainers import.

GEM's ``BASE_IMPORTS``/``BASE_LEETCODE_IMPORTS`` are not here: they are the prelude GEM's host
sandbox (``gem.utils.sandbox``) prepends to model code, and code here runs as written, in a
real sandbox.
"""

from __future__ import annotations

#: The observation of every single-turn env after its one step (GEM's string, exactly).
TERMINAL_STATE = "<｜TERMINAL_STATE｜>"


class LanguageGameReward:
    """The rewards GEM's games give for the common outcomes (GEM's values)."""

    #: the task is completed
    success_reward: float = 1.0
    #: a step that does not end the game, e.g. a hint in Guess the Number
    internal_step_reward: float = 0.0
    #: the task is failed, e.g. a mine is hit in Minesweeper
    fail_reward: float = 0.0
    #: an invalid action, e.g. a guess outside the range in Guess the Number
    invalid_action_reward: float = 0.0
    #: a format error: no action could be parsed
    format_error_reward: float = -0.1
