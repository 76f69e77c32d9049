"""GEM's ``gem.envs.qa_env``: question answering scored by exact match.

Resolved lazily from the catalogue on first access (see :mod:`gem_sandbox.envs._lazy`).
"""

from gem_sandbox.envs._lazy import lazy_exports
from gem_sandbox.utils.constants import TERMINAL_STATE

__all__ = ["QaEnv", "TERMINAL_STATE"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "QaEnv": "gem_sandbox_envs.qa.qa_env:QaEnv",
    },
)
