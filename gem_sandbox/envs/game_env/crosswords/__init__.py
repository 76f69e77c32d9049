"""GEM's ``gem.envs.game_env.crosswords``: a text game (a package in GEM).

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["CrosswordsEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CrosswordsEnv": "gem_sandbox_envs.games.crosswords:CrosswordsEnv",
    },
)
