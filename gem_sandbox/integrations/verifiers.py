"""Catalogue envs as verifiers environments: ``vf.load_environment("gem_sandbox.integrations.verifiers", gem_env_id=...)``.

verifiers (Prime Intellect) loads an environment by importing the module its id names and
calling that module's ``load_environment(**env_args)``; this module is one, for every
catalogue id. It speaks verifiers' classic stack (``vf.MultiTurnEnv``, ``vf.SingleTurnEnv``,
``vf.Rubric``; in verifiers 0.3 it lives in ``verifiers.legacy`` and answers as ``import
verifiers as vf``, and 0.4 dropped it for its v1 taskset/harness stack).

The dataset is ``num_examples`` rows from :meth:`Scorer.rows`: the question is the env's
first observation for the row's seed, ``info`` holds ``env_id`` and ``seed``.

- :class:`GemMultiTurnEnv` plays the episode: each rollout resets its own env to the row's
  seed, every model turn is one ``step`` (tool calls run in sandboxes when ``wrappers`` name a
  tool), each observation comes back as the next user message, and the episode's end is a
  ``final_env_response``. The rubric's reward is the sum of the env's step rewards.
- :class:`GemSingleTurnEnv` (the default for an unwrapped single-turn scored env: code, math,
  qa, rg, eval) leaves the one model turn to verifiers and scores the completion with the
  shared :class:`Scorer`, so a sandbox failure is reported as ``infra_error``, a metric
  trainers can mask on.

Envs are driven in worker threads through their sync API, their sandboxes from the
``SyncRuntime`` given (or the process default); each rollout's env is closed when verifiers
cleans the rollout up, however it ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import verifiers as vf
from datasets import Dataset

from gem_sandbox.core import Env
from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.sync import SyncRuntime

__all__ = ["GemMultiTurnEnv", "GemSingleTurnEnv", "load_environment"]

SINGLE_TURN_NAMESPACES = ("code", "math", "qa", "rg", "eval")


def _dataset(scorer: Scorer, num_examples: int, seed: int) -> Dataset:
    rows = scorer.rows(num_examples, seed)
    return Dataset.from_list(
        [
            {"question": row["prompt"], "answer": "", "info": {"env_id": row["env_id"], "seed": row["seed"]}}
            for row in rows
        ]
    )


def _text(message: Any) -> str:
    """The text of a chat message (``content`` may be None, a string or a list of parts)."""
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return content or ""


class GemMultiTurnEnv(vf.MultiTurnEnv):
    """Whole episodes of ``scorer``'s env, one env per rollout."""

    def __init__(self, scorer: Scorer, *, num_examples: int = 16, seed: int = 0, **kwargs: Any) -> None:
        self.scorer = scorer
        self._envs: dict[str, Env] = {}
        rubric = vf.Rubric(funcs=[self.env_reward])
        rubric.add_metric(self.tool_calls)
        super().__init__(dataset=_dataset(scorer, num_examples, seed), rubric=rubric, **kwargs)

    async def setup_state(self, state: vf.State) -> vf.State:
        env = await anyio.to_thread.run_sync(self.scorer.make_env)
        self._envs[state["trajectory_id"]] = env
        await anyio.to_thread.run_sync(lambda: env.reset(seed=state["info"]["seed"]))
        state["gem_rewards"] = []
        state["gem_info"] = {}
        return await super().setup_state(state)

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        env = self._envs[state["trajectory_id"]]
        action = _text(messages[-1]) if messages else ""
        obs, reward, terminated, truncated, info = await anyio.to_thread.run_sync(env.step, action)
        state["gem_rewards"].append(float(reward))
        state["gem_info"] = dict(info)
        if terminated or truncated:
            state["final_env_response"] = []
            return []
        return [{"role": "user", "content": str(obs)}]

    @vf.cleanup
    async def close_env(self, state: vf.State) -> None:
        """The rollout is over, however it ended: its env and sandboxes go back."""
        env = self._envs.pop(state.get("trajectory_id"), None)
        if env is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(env.close)

    async def env_reward(self, state: vf.State) -> float:
        """The episode's reward: the sum of the env's step rewards."""
        return sum(state.get("gem_rewards") or [])

    async def tool_calls(self, state: vf.State) -> float:
        return float((state.get("gem_info") or {}).get("tool_use_counter", 0))


class GemSingleTurnEnv(vf.SingleTurnEnv):
    """One completion per row, scored by the shared :class:`Scorer`."""

    def __init__(self, scorer: Scorer, *, num_examples: int = 16, seed: int = 0, **kwargs: Any) -> None:
        self.scorer = scorer
        rubric = vf.Rubric(funcs=[self.env_reward])
        rubric.add_metric(self.infra_error)
        super().__init__(dataset=_dataset(scorer, num_examples, seed), rubric=rubric, **kwargs)

    async def env_reward(self, completion: vf.Messages, info: Mapping[str, Any], state: vf.State) -> float:
        """The env's reward for the completion's last assistant message on the row's task."""
        text = _text(completion[-1]) if completion else ""
        [scored] = await anyio.to_thread.run_sync(self.scorer.score_many, [(text, info["seed"])])
        state["gem_status"] = scored.status
        return scored.reward

    async def infra_error(self, state: vf.State) -> float:
        """1 when the sandbox failed rather than the answer: mask such a sample."""
        return float(state.get("gem_status") == "infra_error")


def load_environment(
    gem_env_id: str = "game:GuessTheNumber-v0",
    *,
    wrappers: str = "",
    num_examples: int = 16,
    seed: int = 0,
    single_turn: bool | None = None,
    runtime: SyncRuntime | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> vf.Environment:
    """verifiers' entry point (the keyword is ``gem_env_id``: verifiers' own loader takes
    ``env_id``, this module's name). ``single_turn`` None: single-turn for an unwrapped env of a
    scored namespace (``code:``, ``math:``, ...), multi-turn otherwise; ``kwargs`` go to
    verifiers' env (``max_turns``, ``system_prompt``, ...). An unknown env id or wrapper
    raises here."""
    scorer = Scorer(gem_env_id, runtime=runtime, wrappers=wrappers, **dict(env_kwargs or {}))
    if single_turn is None:
        single_turn = not wrappers and gem_env_id.split(":", 1)[0] in SINGLE_TURN_NAMESPACES
    cls = GemSingleTurnEnv if single_turn else GemMultiTurnEnv
    return cls(scorer, num_examples=num_examples, seed=seed, **kwargs)
