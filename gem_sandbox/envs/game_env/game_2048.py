"""GEM's ``gem.envs.game_env.game_2048``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["Game2048Env"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Game2048Env": "gem_sandbox_envs.games.game_2048:Game2048Env",
    },
)
