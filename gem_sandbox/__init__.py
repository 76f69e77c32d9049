"""gem-sandbox: GEM-compatible environments whose tools run in real, pooled sandboxes.

``import gem_sandbox as gem`` gives GEM's public surface (``make``, ``make_vec``,
``register``, ``print_envs``, ``Env``, ``EnvWrapper``), so training code switches by changing
one import.
"""

from __future__ import annotations

from gem_sandbox.core import Env, EnvWrapper
from gem_sandbox.registry import EnvSpec, make, make_vec, print_envs, register

__all__ = ["Env", "EnvSpec", "EnvWrapper", "configure", "make", "make_vec", "print_envs", "register"]
__version__ = "0.1.0"


def configure(backend: str | None = None, **options: object):
    """Choose the sandbox backend (``auto``, ``local``, ``docker``, ``process``) and
    pool options for pools created from now on. See :mod:`gem_sandbox.sandbox.config`."""
    from gem_sandbox.sandbox.config import configure as _configure

    return _configure(backend, **options)
