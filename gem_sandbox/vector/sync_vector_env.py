"""Step envs one after another through their sync faces (``gem.vector.sync_vector_env``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from gem_sandbox.core import close_env
from gem_sandbox.vector.vector_env import (
    Actions,
    EnvError,
    Plan,
    ResetBatch,
    Seeds,
    StepBatch,
    T,
    VectorEnv,
)


class SyncVectorEnv(VectorEnv):
    """Steps envs one after another through their sync faces (GEM's ``SyncVectorEnv``).

    No event loop is involved beyond what each env's own sync face uses, and a sync-native env
    runs in the caller's thread. ``step_timeout`` is not supported (a sync call cannot be
    interrupted without a thread per step); use :class:`AsyncVectorEnv` for it.
    """

    supports_step_timeout: ClassVar[bool] = False

    def reset(
        self,
        seed: Seeds = None,
        env_kwargs: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> ResetBatch:
        plans = self._reset_plans(seed, env_kwargs, kwargs)
        return self._reset_batch([self._drive(i, plan) for i, plan in plans])

    def step(self, actions: Actions) -> StepBatch:
        return self._step_batch([self._drive(i, plan) for i, plan in self._step_plans(actions)])

    def close(self) -> None:
        errors: dict[int, Exception] = {}
        for i, env in enumerate(self.envs):
            try:
                close_env(env)
            except Exception as exc:  # the others must still be closed
                errors[i] = exc
        self._raise_close_errors(errors)

    def _drive(self, i: int, plan: Plan[T]) -> T:
        """Run ``plan`` against env ``i``'s sync face."""
        env, result = self.envs[i], None
        try:
            while True:
                call = plan.send(result)
                try:
                    result = call.checked(getattr(env, call.method)(*call.args, **call.kwargs))
                except Exception as exc:  # isolation: one env's bug must not end the batch
                    result = EnvError.from_exception(exc)
        except StopIteration as done:
            return done.value
