"""Math envs with verified answers, registered under ``math:`` ids.

``math:Arithmetic-v0`` draws every kind of problem; with the ``python_tool`` wrapper it makes a
real tool-using episode (compute in the sandbox, then answer in ``\\boxed{}``).
"""

from __future__ import annotations

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, register

SPECS = [EnvSpec("math:Arithmetic-v0", f"{__name__}.arithmetic:ArithmeticEnv", {})]


def register_all() -> None:
    """Register every math id; ids already registered identically are left alone."""
    for spec in SPECS:
        if ENV_REGISTRY.get(spec.id) != spec:
            register(spec.id, spec.entry_point, **spec.kwargs)
