"""GEM's ``gem.envs.game_env.sudoku``: a text game.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports

__all__ = ["SudokuEnv"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "SudokuEnv": "gem_sandbox_envs.games.sudoku:SudokuEnv",
    },
)
