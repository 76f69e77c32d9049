"""gem-sandbox: GEM-compatible environments whose tools run in real, pooled sandboxes.

``import gem_sandbox as gem`` gives GEM's public surface (``make``, ``make_vec``,
``register``, ``print_envs``, ``Env``, ``EnvWrapper``), so training code switches by changing
one import.
"""

from gem_sandbox.core import Env, EnvWrapper
from gem_sandbox.registry import EnvSpec, make, make_vec, print_envs, register

__all__ = ["Env", "EnvSpec", "EnvWrapper", "make", "make_vec", "print_envs", "register"]
__version__ = "0.1.0"
