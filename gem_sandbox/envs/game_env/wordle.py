"""GEM's ``gem.envs.game_env.wordle``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["WordleEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "WordleEnv": "gem_sandbox_envs.games.wordle:WordleEnv",
    },
)
