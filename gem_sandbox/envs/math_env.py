"""GEM's ``gem.envs.math_env``: math problems with a boxed answer.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports
from gem_sandbox.utils.constants import TERMINAL_STATE

__all__ = ["MathEnv", "TERMINAL_STATE"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MathEnv": "gem_sandbox_envs.math.math_env:MathEnv",
    },
)
