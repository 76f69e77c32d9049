"""GEM's ``gem.envs.game_env.hangman``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["HangmanEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "HangmanEnv": "gem_sandbox_envs.games.hangman:HangmanEnv",
    },
)
