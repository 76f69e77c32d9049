"""GEM's ``gem.envs.game_env.guess_the_number``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["GuessTheNumberEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GuessTheNumberEnv": "gem_sandbox_envs.games.guess_the_number:GuessTheNumberEnv",
    },
)
