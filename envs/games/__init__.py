"""GEM's text games (from TextArena and beyond), registered under GEM's ``game:`` ids.

Every game has GEM's ``-v0-easy``, ``-v0-hard`` and ``-v0-random`` settings (``None`` settings
are drawn per episode) and a plain ``-v0``: the easy setting, except for GuessTheNumber whose
``-v0`` is the 1-20 game of GEM's README.
"""

from __future__ import annotations

from typing import Any

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

#: game name -> ("module:Class" within this package, {id suffix: kwargs}), GEM's settings.
GAMES: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    "GuessTheNumber": (
        "guess_the_number:GuessTheNumberEnv",
        {
            "v0": dict(min_number=1, max_number=20, max_turns=20),
            "v0-easy": dict(min_number=1, max_number=10, max_turns=4),
            "v0-hard": dict(min_number=1, max_number=50, max_turns=7),
            "v0-random": dict(min_number=None, max_number=None, max_turns=None),
        },
    ),
    "Mastermind": (
        "mastermind:MastermindEnv",
        {
            "v0-easy": dict(code_length=2, num_numbers=6, max_turns=10, duplicate_numbers=False),
            "v0-hard": dict(code_length=4, num_numbers=8, max_turns=30, duplicate_numbers=False),
            "v0-random": dict(
                code_length=None, num_numbers=None, max_turns=None, duplicate_numbers=False
            ),
        },
    ),
    "Minesweeper": (
        "minesweeper:MinesweeperEnv",
        {
            "v0-easy": dict(rows=5, cols=5, num_mines=5, max_turns=25),
            "v0-hard": dict(rows=8, cols=8, num_mines=12, max_turns=64),
            "v0-random": dict(rows=None, cols=None, num_mines=None, max_turns=None),
        },
    ),
    "Wordle": (
        "wordle:WordleEnv",
        {
            "v0-easy": dict(word_length=3, only_real_words=True, max_turns=15),
            "v0-hard": dict(word_length=5, only_real_words=True, max_turns=25),
            "v0-random": dict(word_length=None, only_real_words=True, max_turns=None),
        },
    ),
    "FifteenPuzzle": (
        "fifteen_puzzle:FifteenPuzzleEnv",
        {
            "v0-easy": dict(num_rows=2, max_turns=10),
            "v0-hard": dict(num_rows=4, max_turns=50),
            "v0-random": dict(num_rows=None, max_turns=None),
        },
    ),
    "Hangman": (
        "hangman:HangmanEnv",
        {
            "v0-easy": dict(word_length=3, hardcore=False, max_turns=10),
            "v0-hard": dict(word_length=7, hardcore=False, max_turns=20),
            "v0-random": dict(word_length=None, hardcore=False, max_turns=None),
        },
    ),
    "Sudoku": (
        "sudoku:SudokuEnv",
        {
            "v0-easy": dict(clues=10, max_turns=15, scale=4),
            "v0-hard": dict(clues=50, max_turns=50, scale=9),
            "v0-random": dict(clues=None, max_turns=None, scale=None),
        },
    ),
    "TowerofHanoi": (
        "tower_of_hanoi:TowerofHanoiEnv",
        {
            "v0-easy": dict(num_disks=3, max_turns=10),
            "v0-hard": dict(num_disks=5, max_turns=35),
            "v0-random": dict(num_disks=None, max_turns=None),
        },
    ),
    "Game2048": (
        "game_2048:Game2048Env",
        {
            "v0-easy": dict(target_tile=64, max_turns=50),
            "v0-hard": dict(target_tile=512, max_turns=50),
            "v0-extreme-hard": dict(target_tile=2048, max_turns=100),
            "v0-random": dict(target_tile=None, max_turns=None),
        },
    ),
    "Sokoban": (
        "sokoban:SokobanEnv",
        {
            "v0-easy": dict(dim_room=(6, 6), num_boxes=2, max_turns=20),
            "v0-hard": dict(dim_room=(8, 8), num_boxes=4, max_turns=50),
            # GEM registers room_size=None, which its SokobanEnv swallows; dim_room is meant.
            "v0-random": dict(dim_room=None, num_boxes=None, max_turns=None),
        },
    ),
    "Crosswords": (
        "crosswords:CrosswordsEnv",
        {
            "v0-easy": dict(hardcore=False, max_turns=30, num_words=3),
            "v0-hard": dict(hardcore=True, max_turns=40, num_words=3),
            "v0-random": dict(hardcore=None, max_turns=None, num_words=None),
        },
    ),
    "WordSearch": (
        "word_search:WordSearchEnv",
        {
            "v0-easy": dict(num_words=5, max_turns=20, hardcore=False),
            "v0-hard": dict(num_words=5, max_turns=20, hardcore=True),
            "v0-random": dict(num_words=None, max_turns=None, hardcore=None),
        },
    ),
}


def game_specs() -> list[EnvSpec]:
    """The spec of every game id, plain ``-v0`` aliases of the easy settings included."""
    specs = []
    for name, (target, variants) in GAMES.items():
        entry_point = f"{__name__}.{target}"
        for suffix, kwargs in {"v0": variants["v0-easy"], **variants}.items():
            specs.append(EnvSpec(f"game:{name}-{suffix}", entry_point, kwargs))
    return specs


def register_all() -> None:
    """Register every game id; ids already registered identically are left alone."""
    for spec in game_specs():
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
