"""GEM's ``gem.envs.game_env.word_search``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["WordSearchEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "WordSearchEnv": "gem_sandbox_envs.games.word_search:WordSearchEnv",
    },
)
