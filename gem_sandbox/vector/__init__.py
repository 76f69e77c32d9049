"""Vectorized environments: many envs stepped as one batch.

* :class:`SyncVectorEnv` steps envs one after another through their sync faces
  (``reset``/``step``/``close``), like GEM's: no event loop of its own, and a sync-native env
  runs in the caller's thread. It has no ``step_timeout``: a sync call cannot be interrupted
  without a thread per step.
* :class:`AsyncVectorEnv` steps them concurrently through their async faces in one task group.
  There is no thread per env: an env that waits on a sandbox yields the loop to the others, and
  a thousand envs cost a thousand coroutines, not a thousand threads.

Both are :class:`~gem_sandbox.core.Env` subclasses built GEM's way (``env_ids, env_fns``) or
from envs already made. GEM's module paths are the submodules: :mod:`.vector_env`,
:mod:`.sync_vector_env`, :mod:`.async_vector_env`.
"""

from gem_sandbox.vector.async_vector_env import AsyncVectorEnv, step_reset_env
from gem_sandbox.vector.sync_vector_env import SyncVectorEnv
from gem_sandbox.vector.vector_env import (
    ArrayType,
    AutoresetMode,
    EnvCall,
    EnvError,
    Plan,
    SpawnOf,
    VectorEnv,
    VectorSizeError,
)

__all__ = [
    "ArrayType",
    "AsyncVectorEnv",
    "AutoresetMode",
    "EnvCall",
    "EnvError",
    "Plan",
    "SpawnOf",
    "SyncVectorEnv",
    "VectorEnv",
    "VectorSizeError",
    "step_reset_env",
]
