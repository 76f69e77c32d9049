"""GEM's ``gem.envs.game_env.tower_of_hanoi``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["TowerofHanoiEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "TowerofHanoiEnv": "gem_sandbox_envs.games.tower_of_hanoi:TowerofHanoiEnv",
    },
)
