"""GEM's ``gem.envs.code_env``: code problems scored against their tests, here in a sandbox.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports
from gem_sandbox.utils.constants import TERMINAL_STATE

__all__ = ["CodeEnv", "TERMINAL_STATE"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CodeEnv": "gem_sandbox_envs.code.stdio:CodeEnv",
    },
)
