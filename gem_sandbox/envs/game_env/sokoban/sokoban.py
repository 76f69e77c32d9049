"""GEM's ``gem.envs.game_env.sokoban.sokoban``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["SokobanEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SokobanEnv": "gem_sandbox_envs.games.sokoban:SokobanEnv",
    },
)
