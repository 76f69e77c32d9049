"""Terminal tasks in Terminal-Bench's and Harbor's formats, run in Docker sandboxes.

``terminal:Shipped-v0`` serves every task shipped in ``tasks/`` (one per episode, in a seeded
order), ``terminal:<task>`` one of them; ``gem.make("terminal:Shipped-v0", tasks="path")``
serves a directory of your own. These ids are gem-sandbox's: GEM's terminal env takes task
paths rather than registering ids. See :mod:`.env` and :mod:`.verifier`.
"""

from __future__ import annotations

from importlib.resources import files

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

_ENV = f"{__name__}.env:TerminalEnv"


def shipped_names() -> list[str]:
    """The shipped tasks' names, from their directories (nothing is parsed to list them)."""
    root = files(__name__).joinpath("tasks")
    return sorted(entry.name for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("_"))


def specs() -> list[EnvSpec]:
    return [EnvSpec("terminal:Shipped-v0", _ENV, {}), *(EnvSpec(f"terminal:{name}", _ENV, {"task": name}) for name in shipped_names())]


def register_all() -> None:
    """Register every terminal id; ids already registered identically are left alone."""
    for spec in specs():
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
