"""Catalogue envs as Tinker cookbook RL envs: ``Env``, ``EnvGroupBuilder``, ``RLDataset``.

The cookbook's training loop asks an :class:`~tinker_cookbook.rl.types.RLDataset` for batches
of ``EnvGroupBuilder``\\ s, builds each group's envs with ``make_envs()``, rolls every env out
(``initial_observation()``, then ``step(tokens)`` until ``episode_done``), centres rewards
across the group and finally calls the builder's ``cleanup()``. Here, as in GEM's own Tinker
adapter, an env keeps the conversation as chat messages and the cookbook's ``Renderer`` turns
it into tokens and parses the sampled tokens back into text; a response that did not end
cleanly (``ParseTermination`` not clean: cut off mid-turn) reaches the env as empty text, so
the env's format rule judges it.

Every env of a group gets a distinct seed (a builder carries its seeds), so a batch never
repeats a task by accident; ``same_task=True`` gives the whole group one seed instead (GRPO's
several answers to one prompt). Builders hold only settings and the renderer, so they pickle
for the cookbook's distributed rollouts; the gem-sandbox envs are made in ``make_envs`` and
closed in ``cleanup`` (also when a rollout fails). Envs are stepped in a worker thread through
their sync API, their sandboxes from the process default runtime (``gem_sandbox.configure``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import chz
import tinker
from tinker_cookbook import renderers
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    Observation,
    RLDataset,
    RLDatasetBuilder,
    StepResult,
)
from tinker_cookbook.tokenizer_utils import get_tokenizer

from gem_sandbox.core import Env as GemEnv
from gem_sandbox.integrations.scoring import Scorer

__all__ = ["GemDataset", "GemDatasetBuilder", "GemEnvGroupBuilder", "GemTinkerEnv"]


class GemTinkerEnv(Env):
    """One episode of a gem-sandbox env, reset to ``seed``, in the cookbook's token terms."""

    def __init__(
        self,
        env: GemEnv,
        seed: int | None,
        renderer: renderers.Renderer,
        convo_prefix: Sequence[renderers.Message] = (),
    ) -> None:
        self.env = env
        self.seed = seed
        self.renderer = renderer
        self.convo: list[renderers.Message] = list(convo_prefix)

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        obs, _ = await anyio.to_thread.run_sync(lambda: self.env.reset(seed=self.seed))
        self.convo.append({"role": "user", "content": str(obs)})
        return self.renderer.build_generation_prompt(self.convo), self.stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        text = renderers.get_text_content(message) if termination.is_clean else ""
        obs, reward, terminated, truncated, info = await anyio.to_thread.run_sync(self.env.step, text)
        done = bool(terminated or truncated)
        self.convo.append({"role": "assistant", "content": text})
        if not done:
            self.convo.append({"role": "user", "content": str(obs)})
        return StepResult(
            reward=float(reward),
            episode_done=done,
            next_observation=tinker.ModelInput.empty() if done else self.renderer.build_generation_prompt(self.convo),
            next_stop_condition=self.stop_condition,
            metrics=_numbers(info),
        )


@dataclass(frozen=True)
class GemEnvGroupBuilder(EnvGroupBuilder):
    """A group of episodes of ``env_id``, one per seed in ``seeds``."""

    env_id: str
    seeds: tuple[int, ...]
    renderer: renderers.Renderer
    wrappers: str = ""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    convo_prefix: tuple[renderers.Message, ...] = ()
    _made: list[GemEnv] = field(default_factory=list, compare=False, repr=False)

    async def make_envs(self) -> Sequence[Env]:
        scorer = Scorer(self.env_id, wrappers=self.wrappers, **self.env_kwargs)
        envs = []
        for seed in self.seeds:
            env = await anyio.to_thread.run_sync(scorer.make_env)
            self._made.append(env)
            envs.append(GemTinkerEnv(env, seed, self.renderer, self.convo_prefix))
        return envs

    async def cleanup(self) -> None:
        """Close every env this group made: their sandboxes go back."""
        while self._made:
            env = self._made.pop()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(env.close)

    def logging_tags(self) -> list[str]:
        return self.env_id.split(":")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": []}  # made envs stay where they were made


class GemDataset(RLDataset):
    """``n_batches`` batches of ``groups_per_batch`` groups of ``group_size`` episodes; seeds
    count up from ``seed`` so no two episodes share one (unless ``same_task``)."""

    def __init__(
        self,
        env_id: str,
        renderer: renderers.Renderer,
        *,
        group_size: int,
        groups_per_batch: int,
        n_batches: int,
        seed: int = 0,
        same_task: bool = False,
        wrappers: str = "",
        env_kwargs: Mapping[str, Any] | None = None,
        convo_prefix: Sequence[renderers.Message] = (),
    ) -> None:
        if min(group_size, groups_per_batch, n_batches) < 1:
            raise ValueError("group_size, groups_per_batch and n_batches must each be at least 1")
        Scorer(env_id, wrappers=wrappers)  # an unknown env id or wrapper fails here, not mid-training
        self.env_id, self.renderer, self.wrappers = env_id, renderer, wrappers
        self.group_size, self.groups_per_batch, self.n_batches = group_size, groups_per_batch, n_batches
        self.seed, self.same_task = seed, same_task
        self.env_kwargs = dict(env_kwargs or {})
        self.convo_prefix = tuple(convo_prefix)

    def get_batch(self, index: int) -> list[EnvGroupBuilder]:
        if not 0 <= index < self.n_batches:
            raise IndexError(f"batch {index} of {self.n_batches}")
        return [self._group(index * self.groups_per_batch + g) for g in range(self.groups_per_batch)]

    def _group(self, number: int) -> GemEnvGroupBuilder:
        if self.same_task:
            seeds = (self.seed + number,) * self.group_size
        else:
            first = self.seed + number * self.group_size
            seeds = tuple(range(first, first + self.group_size))
        return GemEnvGroupBuilder(
            self.env_id, seeds, self.renderer, self.wrappers, self.env_kwargs, self.convo_prefix
        )

    def __len__(self) -> int:
        return self.n_batches


@chz.chz
class GemDatasetBuilder(RLDatasetBuilder):
    """The cookbook's dataset config for a catalogue env (``env_kwargs_json``: keywords for
    :func:`gem_sandbox.make`, as JSON so chz's CLI can carry them)."""

    env_id: str
    model_name_for_tokenizer: str
    renderer_name: str
    group_size: int
    groups_per_batch: int
    n_batches: int = 100
    seed: int = 0
    same_task: bool = False
    wrappers: str = ""
    env_kwargs_json: str | None = None

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        renderer = renderers.get_renderer(self.renderer_name, tokenizer=get_tokenizer(self.model_name_for_tokenizer))
        dataset = GemDataset(
            self.env_id,
            renderer,
            group_size=self.group_size,
            groups_per_batch=self.groups_per_batch,
            n_batches=self.n_batches,
            seed=self.seed,
            same_task=self.same_task,
            wrappers=self.wrappers,
            env_kwargs=json.loads(self.env_kwargs_json) if self.env_kwargs_json else None,
        )
        return dataset, None


def _numbers(info: Mapping[str, Any]) -> Metrics:
    """The numeric entries of GEM's info: the cookbook aggregates them as metrics."""
    return {
        key: float(value)
        for key, value in info.items()
        if isinstance(value, (int, float)) and math.isfinite(float(value))
    }
