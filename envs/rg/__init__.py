"""reasoning-gym's datasets under GEM's ids: ``rg:<name>`` for every dataset it ships, with
GEM's kwargs (``name``, ``size=500``, ``seed=42``).

Registering imports neither reasoning-gym nor the env module; the names come from
:mod:`.names`. Building an env needs the ``rg`` extra (``pip install 'gem-sandbox[rg]'``).
"""

from __future__ import annotations

from gem_sandbox_envs.rg.names import DATASET_NAMES

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

SPECS = [
    EnvSpec(f"rg:{name}", f"{__name__}.env:ReasoningGymEnv", {"name": name, "size": 500, "seed": 42})
    for name in DATASET_NAMES
]


def register_all() -> None:
    """Register every rg id; ids already registered identically are left alone."""
    for spec in SPECS:
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
