"""GEM's ``gem.envs.reasoning_gym``: reasoning-gym's datasets as single-turn envs.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports
from gem_sandbox.utils.constants import TERMINAL_STATE

__all__ = ["ReasoningGymEnv", "TERMINAL_STATE"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ReasoningGymEnv": "gem_sandbox_envs.rg.env:ReasoningGymEnv",
    },
)
