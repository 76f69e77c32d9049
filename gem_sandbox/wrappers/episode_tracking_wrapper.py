"""Count steps and sum rewards per episode (use it as the outermost wrapper)."""

from __future__ import annotations

from typing import Any, ClassVar

from gem_sandbox.core import Env, EnvWrapper, ResetReturn, StepReturn, areset_env, astep_env


class EpisodeTrackingWrapper(EnvWrapper):
    """Adds ``step_counter`` and ``cumulative_rewards`` to every info, and on reset the
    previous episode's totals as ``prev_ep_step_counter`` / ``prev_ep_cumulative_rewards``.

    The counters are the wrapper's state: ``get_state``/``set_state`` carry them and copies
    get their own."""

    _state_attrs: ClassVar[tuple[str, ...]] = ("step_counter", "cumulative_rewards")

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.step_counter = 0
        self.cumulative_rewards = 0.0

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self._on_reset(*self.env.reset(seed=seed, **kwargs))

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self._on_reset(*await areset_env(self.env, seed=seed, **kwargs))

    def step(self, action: Any) -> StepReturn:
        return self._on_step(*self.env.step(action))

    async def astep(self, action: Any) -> StepReturn:
        return self._on_step(*await astep_env(self.env, action))

    def _on_reset(self, obs: Any, info: dict[str, Any]) -> ResetReturn:
        info.update(
            prev_ep_step_counter=self.step_counter,
            prev_ep_cumulative_rewards=self.cumulative_rewards,
            step_counter=0,
            cumulative_rewards=0.0,
        )
        self.step_counter, self.cumulative_rewards = 0, 0.0
        return obs, info

    def _on_step(self, obs: Any, reward: Any, terminated: bool, truncated: bool, info: dict) -> StepReturn:
        self.step_counter += 1
        self.cumulative_rewards += float(reward)
        info.update(step_counter=self.step_counter, cumulative_rewards=self.cumulative_rewards)
        return obs, reward, terminated, truncated, info
