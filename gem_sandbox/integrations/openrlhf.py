"""Any catalogue env as an OpenRLHF agent: the file ``--train.agent_func_path`` names.

OpenRLHF (0.11) loads that file, takes its ``AgentExecutor`` (an ``AgentExecutorBase``) and
builds it with no arguments. Its ``MultiTurnAgentExecutor`` builds one agent instance per
sample, also without arguments, calls ``reset({"observation": prompt, "label": label})`` and
then ``step({"observation_text", "action_text", "label", "sampling_params"})`` until the
result says ``done``, reading ``rewards`` (with ``.item()``), ``scores``,
``environment_feedback``, ``done``, ``sampling_params`` and ``extra_logs`` from each step.

:func:`agent_executor` returns that executor class for one env id, so an agent file is::

    from gem_sandbox.integrations.openrlhf import agent_executor
    AgentExecutor = agent_executor("game:GuessTheNumber-v0")

Each sample's env is reset to the seed its ``label`` holds (an int, as ``Scorer.rows`` writes
a row's ``seed``; no label: a fresh random episode), and its first observation is the prompt
OpenRLHF gives (the dataset row built from that seed, chat-templated by the trainer if asked)
or, when that is empty, the env's own. Between turns the env's observation goes back through
``feedback`` (GEM's examples wrap it in the model's chat template). The env is stepped in a
worker thread through its sync API, its sandboxes from the process default runtime (or the
``SyncRuntime`` given), so it runs on whatever event loop OpenRLHF's vLLM actor has; the
episode's sandboxes go back when it ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import numpy as np
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from gem_sandbox.core import Env
from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.sync import SyncRuntime

__all__ = ["agent_executor", "agent_instance", "seed_from_label"]

Feedback = Callable[[str], str]


def seed_from_label(label: Any) -> int | None:
    """The episode seed a dataset label carries: an int or its decimal text; else None."""
    if isinstance(label, bool) or label is None:
        return None
    if isinstance(label, int):
        return label
    if isinstance(label, str) and label.strip().lstrip("-").isdigit():
        return int(label)
    return None


def agent_instance(
    env_id: str,
    *,
    wrappers: str = "",
    feedback: Feedback = lambda obs: f"\n{obs}\n",
    runtime: SyncRuntime | None = None,
    **env_kwargs: Any,
) -> type[AgentInstanceBase]:
    """An ``AgentInstanceBase`` subclass playing ``env_id`` (wrapped with GEM's wrapper-factory
    names). An unknown env id or wrapper raises here, when the agent file loads."""
    factory = Scorer(env_id, runtime=runtime, wrappers=wrappers, **env_kwargs)

    class GemAgentInstance(AgentInstanceBase):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.env: Env = factory.make_env()
            self.turns = 0

        async def reset(self, states: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
            obs, _ = await anyio.to_thread.run_sync(lambda: self.env.reset(seed=seed_from_label(states.get("label"))))
            self.turns = 0
            return {"observation": states.get("observation") or obs}

        async def step(self, states: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
            action = states["action_text"]
            try:
                if not isinstance(action, str):
                    raise TypeError(f"action_text is the model's text, got {type(action).__name__}")
                obs, reward, terminated, truncated, info = await anyio.to_thread.run_sync(self.env.step, action)
            except BaseException:  # the episode cannot go on: its sandboxes go back now
                await self.aclose()
                raise
            self.turns += 1
            done = bool(terminated or truncated)
            if done:
                await self.aclose()
            return {
                "rewards": np.float64(reward),
                "scores": float(reward),
                "environment_feedback": "" if done else feedback(str(obs)),
                "done": done,
                "sampling_params": states.get("sampling_params"),
                "extra_logs": {"turns": float(self.turns), **_numbers(info)},
            }

        async def aclose(self) -> None:
            """Give the episode's sandboxes back (also when the episode ends)."""
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.env.close)

    GemAgentInstance.__qualname__ = GemAgentInstance.__name__ = f"GemAgentInstance[{env_id}]"
    return GemAgentInstance


def agent_executor(env_id: str, **options: Any) -> type[MultiTurnAgentExecutor]:
    """The ``AgentExecutor`` class an OpenRLHF agent file exports: OpenRLHF's own multi-turn
    executor over :func:`agent_instance` (``options`` are its keywords)."""
    instance = agent_instance(env_id, **options)

    class AgentExecutor(MultiTurnAgentExecutor):
        def __init__(self) -> None:
            super().__init__(instance)

    return AgentExecutor


def _numbers(info: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of GEM's info, which OpenRLHF turns into logged tensors."""
    out = {}
    for key, value in info.items():
        if isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value)):
            out[key] = float(value)
    return out
