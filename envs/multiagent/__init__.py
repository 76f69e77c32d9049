"""Multi-agent games on GEM's :class:`~gem_sandbox.multiagent.MultiAgentEnv`, registered under
``multiagent:`` ids: tic-tac-toe (agents take turns) and iterated rock-paper-scissors (agents move
at once)."""

from __future__ import annotations

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

#: id -> ("module:Class" within this package, kwargs).
GAMES: dict[str, tuple[str, dict[str, object]]] = {
    "multiagent:TicTacToe-v0": ("tic_tac_toe:TicTacToeEnv", {}),
    "multiagent:TicTacToe-v0-random": ("tic_tac_toe:TicTacToeEnv", {"first_player": None}),
    "multiagent:RockPaperScissors-v0": ("rock_paper_scissors:RockPaperScissorsEnv", {"num_rounds": 3}),
    "multiagent:RockPaperScissors-v0-random": (
        "rock_paper_scissors:RockPaperScissorsEnv",
        {"num_rounds": None},
    ),
}


def multiagent_specs() -> list[EnvSpec]:
    return [EnvSpec(env_id, f"{__name__}.{target}", kwargs) for env_id, (target, kwargs) in GAMES.items()]


def register_all() -> None:
    """Register every multi-agent id; ids already registered identically are left alone."""
    for spec in multiagent_specs():
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
