"""Catalogue envs as SkyRL-gym text envs: ``register()``, then SkyRL-train names them.

SkyRL-train builds one env per trajectory with ``skyrl_gym.make(env_class,
env_config=<its config section>, extras=<the dataset row's other columns>)``, calls
``init(prompt)`` with the row's chat messages, then ``step(model_text)`` until ``done``, and
``close()``. :func:`register` puts every catalogue id (or those named) in SkyRL-gym's registry,
each a :class:`GemTextEnv`: a gem-sandbox env made and wrapped with GEM's wrapper-factory
names (``python_tool`` runs the model's code in a sandbox), reset to the row's ``seed``.

The row's prompt is kept as ``init`` returns it (``Scorer.rows`` builds it from that seed's
first observation); a row with no prompt starts from the env's own observation. Each step's
observation comes back as one user message (none once the episode ends), GEM's info as the
step's ``metadata``, and GEM's ``parsed_action`` (the text up to the end of a tool call) as
``postprocessed_action``. ``env_config`` (SkyRL-train's ``skyrl_gym.<env_class>`` section)
may carry ``wrappers`` and env keywords, overriding what :func:`register` was given.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any

import skyrl_gym
from skyrl_gym.envs.base_text_env import (
    BaseTextEnv,
    BaseTextEnvStepOutput,
    ConversationType,
)

from gem_sandbox.core import Env
from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.registry import registered_envs, spec
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns

__all__ = ["GemTextEnv", "register"]

_COUNTERS = ("tool_use_counter", "tool_success_counter")


class GemTextEnv(BaseTextEnv):
    """One trajectory's env: ``GemTextEnv(env_config, extras, env_id=..., wrappers=...)``."""

    def __init__(
        self,
        env_config: Mapping[str, Any] | None = None,
        extras: Mapping[str, Any] | None = None,
        *,
        env_id: str,
        wrappers: str = "",
        runtime: SyncRuntime | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        config = dict(env_config or {})
        extras = dict(extras or {})
        self.env_id = env_id
        self.seed = _seed(extras)
        self.max_turns = int(extras.get("max_turns") or 1)
        self.env: Env = Scorer(
            env_id,
            runtime=runtime,
            wrappers=str(config.pop("wrappers", wrappers)),
            **{**(env_kwargs or {}), **config},
        ).make_env()
        self._last_info: dict[str, Any] = {}
        self._closed = False

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Reset the env to the row's seed; the row's messages stay the prompt."""
        obs, info = self.env.reset(seed=self.seed)
        self.turns = 0
        self._last_info = dict(info)
        messages = list(prompt or []) or [{"role": "user", "content": str(obs)}]
        return messages, {"env_id": self.env_id, "seed": self.seed}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if not isinstance(action, str):
            raise TypeError(f"a SkyRL action is the model's text, got {type(action).__name__}")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        self._last_info = dict(info)
        done = bool(terminated or truncated)
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": str(obs)}],
            reward=float(reward),
            done=done,
            metadata=_jsonable(info),
            postprocessed_action=info.get("parsed_action"),
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's tool counts and turns (SkyRL averages numbers across episodes)."""
        return {"turns": self.turns, **{k: self._last_info[k] for k in _COUNTERS if k in self._last_info}}

    def close(self) -> None:
        """Give the env's sandboxes back; a second close does nothing."""
        if not self._closed:
            self._closed = True
            self.env.close()


def register(
    env_ids: Iterable[str] | None = None,
    *,
    wrappers: str = "",
    runtime: SyncRuntime | None = None,
    **env_kwargs: Any,
) -> list[str]:
    """Register ``env_ids`` (default: the whole catalogue) in SkyRL-gym under the same ids,
    each made with ``wrappers`` and ``env_kwargs``; returns the ids registered. An id already
    registered is registered again with these settings. An unknown id or wrapper raises here."""
    ids = list(registered_envs()) if env_ids is None else list(env_ids)
    for env_id in ids:
        spec(env_id)  # UnknownEnvError (a ValueError) names close matches, before registering any
    get_wrapper_fns(wrappers)  # an unknown wrapper name raises here
    for env_id in ids:
        if env_id in skyrl_gym.registry:
            skyrl_gym.envs.registration.deregister(env_id)
        # Settings ride in the entry point, not the spec's kwargs: make() deep-copies those,
        # and a runtime must be shared, not copied.
        entry = functools.partial(GemTextEnv, env_id=env_id, wrappers=wrappers, runtime=runtime, env_kwargs=env_kwargs)
        skyrl_gym.register(id=env_id, entry_point=entry)
    return ids


def _seed(extras: Mapping[str, Any]) -> int | None:
    """The row's seed: ``extras["seed"]``, or in its ``extra_info`` (SkyRL's dataset column)."""
    seed = extras.get("seed", (extras.get("extra_info") or {}).get("seed"))
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, str)) or not str(seed).lstrip("-").isdigit():
        raise ValueError(f"a row's seed is an int, got {seed!r}")
    return int(seed)


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    """GEM's info as SkyRL logs it: numpy scalars as numbers, anything else as text."""
    return json.loads(json.dumps(dict(info), default=lambda value: value.item() if hasattr(value, "item") else str(value)))
