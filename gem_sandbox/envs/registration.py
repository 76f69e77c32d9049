"""GEM's ``gem.envs.registration``: :mod:`gem_sandbox.registry` under GEM's path."""

from gem_sandbox.registry import ENV_REGISTRY, EnvSpec, UnknownEnvError, make, make_vec, print_envs, register

__all__ = ["ENV_REGISTRY", "EnvSpec", "UnknownEnvError", "make", "make_vec", "print_envs", "register"]
