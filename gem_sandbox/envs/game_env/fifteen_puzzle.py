"""GEM's ``gem.envs.game_env.fifteen_puzzle``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["FifteenPuzzleEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FifteenPuzzleEnv": "gem_sandbox_envs.games.fifteen_puzzle:FifteenPuzzleEnv",
    },
)
