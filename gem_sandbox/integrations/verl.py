"""verl (volcengine/verl): gem-sandbox's tools as verl tools, its scored envs as verl's reward
function, and its catalogue as verl's parquet datasets, each in verl's own contract.

* **Tools.** :class:`SandboxPythonTool` and :class:`SandboxShellTool` are
  ``verl.tools.base_tool.BaseTool`` subclasses, named in a tool config YAML (see
  ``examples/verl_tool_config.yaml``) that verl's multi-turn rollout loads. Each instance
  (``create``) is an :class:`~gem_sandbox.tools.Episode`: its ``execute`` calls run in one
  sandbox (a persistent Python kernel, or a persistent bash session), leased at the first
  call, and ``release`` gives it back to the pool, which resets it for the next tenant. verl
  0.9's ``ToolAgentLoop`` makes an instance per tool call (create, execute, release), so there
  each call gets a clean sandbox, as GEM's Python tool does; a rollout that keeps one instance
  per trajectory keeps its kernel's state between calls. A sandbox failure is answered as such
  (``metrics["status"] == "infra_error"``), never as an error in the model's code.
* **Rewards.** :func:`compute_score` is a ``custom_reward_function`` (``path`` this module,
  ``name: compute_score``): a row's ``data_source`` is a catalogue id and its
  ``reward_model.ground_truth`` the task's seed, so the score is what a fresh env reset to that
  seed gives the response (code run against its tests in a sandbox, math verified), through the
  shared :class:`~gem_sandbox.integrations.scoring.Scorer`. It returns verl's dict form,
  ``{"score": reward, "infra_error": 0.0 | 1.0}``: samples with ``infra_error`` 1.0 are the
  sandbox's failure, for the trainer to mask. :func:`compute_score_batch` is the same for
  verl's batch reward manager.
* **Agent loop.** :class:`GemEnvAgentLoop`, registered as ``gem_sandbox_env`` (verl's
  ``AgentLoopBase``), plays a row's catalogue env (``extra_info.env_id`` and ``seed``) with
  the policy: the env's observations are user turns, its rewards the sample's
  ``reward_score`` (so no reward function runs), its tools (``wrappers`` in the agent loop
  config, GEM's names) run in sandboxes. Rows select it with ``agent_name``.
* **Data.** :func:`dataset_rows` / :func:`write_parquet` write the rows verl's ``RLHFDataset``
  reads (``data_source``, ``prompt`` as chat messages, ``ability``, ``reward_model``,
  ``extra_info`` with ``tools_kwargs``) from catalogue ids.

The other way in needs no adapter: verl's SandboxFusion reward path (``sandbox_fusion.url``)
can point at ``gem-sandbox serve``, whose SandboxFusion-compatible ``/run_code`` runs the code
in the same pooled sandboxes.

Sandboxes come from ``runtime``: a :class:`~gem_sandbox.SyncRuntime`, or None for the process
default. verl calls tools from its own event loop, so their calls run on gem-sandbox's loop
(in a worker thread each); a :class:`~gem_sandbox.Runtime` belongs to one loop and is refused.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import anyio.to_thread
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopOutput,
    register,
)
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from gem_sandbox import bridge
from gem_sandbox.core import Env
from gem_sandbox.integrations.scoring import Scored, Scorer
from gem_sandbox.runtime import Runtime
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools import Episode, PythonCodeTool, SandboxTool, ShellTool, ToolCall
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns

__all__ = [
    "AGENT_NAME",
    "GemEnvAgentLoop",
    "SandboxPythonTool",
    "SandboxShellTool",
    "compute_score",
    "compute_score_batch",
    "dataset_rows",
    "write_parquet",
]


class UnknownInstance(KeyError):
    """A tool call named a trajectory that was never created or was already released."""


class _SandboxVerlTool(BaseTool):
    """A verl tool whose instances (one per trajectory) each hold an episode's sandbox.

    ``config`` (the YAML's ``config:``) takes ``timeout`` (seconds per call) and
    ``max_output_chars``; ``tool_schema`` None uses the tool's own OpenAI function schema.
    """

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        tool_schema: OpenAIFunctionToolSchema | None = None,
        *,
        runtime: SyncRuntime | None = None,
    ) -> None:
        if isinstance(runtime, Runtime):
            raise TypeError("verl calls tools from its own event loop: give a SyncRuntime (or None), not a Runtime")
        config = dict(config or {})
        self.tool = self._make_tool(config, runtime)
        schema = tool_schema or OpenAIFunctionToolSchema.model_validate(self.tool.schema())
        super().__init__(config, schema)
        self.episodes: dict[str, Episode] = {}

    def _make_tool(self, config: dict[str, Any], runtime: SyncRuntime | None) -> SandboxTool:
        raise NotImplementedError

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """A trajectory's instance; its sandbox is leased at its first call."""
        instance_id = instance_id or str(uuid.uuid4())
        self.episodes.setdefault(instance_id, Episode())
        return instance_id, ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Run the call in the instance's sandbox: the observation text, step reward 0 (rewards
        come from :func:`compute_score`) and the run's status, exit code and duration."""
        episode = self._episode(instance_id)
        missing = [name for name in self.tool.parameters.get("required", []) if name not in (parameters or {})]
        if missing:  # the model's malformed call: it reads why, nothing runs
            return ToolResponse(text=f"{self.name} needs the argument {missing[0]!r}"), 0.0, {"status": "invalid_arguments"}
        call = ToolCall(self.tool.name, dict(parameters), "", 0)
        output = await anyio.to_thread.run_sync(bridge.run_sync, self.tool.aexecute, call, episode)
        return ToolResponse(text=output.observation), 0.0, dict(output.details)

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """0: a tool earns nothing on its own; the answer is scored by :func:`compute_score`."""
        self._episode(instance_id)
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Give the instance's sandbox back (reset for the next tenant); a second release is a no-op."""
        episode = self.episodes.pop(instance_id, None)
        if episode is not None and len(episode):
            await anyio.to_thread.run_sync(bridge.run_sync, episode.release)

    def _episode(self, instance_id: str) -> Episode:
        try:
            return self.episodes[instance_id]
        except KeyError:
            raise UnknownInstance(f"no tool instance {instance_id!r}: create it first (or it was released)") from None


class SandboxPythonTool(_SandboxVerlTool):
    """Python in a persistent kernel per trajectory: ``{"code": "print(2**10)"}``."""

    def _make_tool(self, config: dict[str, Any], runtime: SyncRuntime | None) -> SandboxTool:
        return PythonCodeTool(
            timeout=float(config.get("timeout", 5)),
            stateful=True,
            max_output_chars=config.get("max_output_chars", 4000),
            runtime=runtime,
        )


class SandboxShellTool(_SandboxVerlTool):
    """A persistent bash session per trajectory: ``{"command": "ls -la"}``."""

    def _make_tool(self, config: dict[str, Any], runtime: SyncRuntime | None) -> SandboxTool:
        return ShellTool(timeout=float(config.get("timeout", 10)), max_output_chars=config.get("max_output_chars", 4000), runtime=runtime)


# -- rewards -----------------------------------------------------------------------------
@functools.cache
def _scorer(env_id: str) -> Scorer:
    return Scorer(env_id)  # the process default runtime: verl's reward manager calls from sync code


def _seed(ground_truth: Any) -> int:
    try:
        return int(ground_truth)
    except (TypeError, ValueError):
        raise ValueError(
            f"ground_truth must be the task's seed (an int), got {ground_truth!r}: write rows with dataset_rows()"
        ) from None


def _verl_score(scored: Scored) -> dict[str, float]:
    return {"score": scored.reward, "infra_error": float(scored.infra_error)}


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> dict[str, float]:
    """verl's reward function: ``solution_str`` scored on env ``data_source``'s task seeded
    ``ground_truth``. An unknown env id or a ground truth that is no seed raises ValueError."""
    return _verl_score(_scorer(data_source).score_many([(solution_str, _seed(ground_truth))])[0])


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
) -> list[dict[str, float]]:
    """verl's batch reward function (``reward_model.reward_manager=batch``): every response
    scored concurrently, one env id's at a time, in the batch's order."""
    if not len(data_sources) == len(solution_strs) == len(ground_truths):
        raise ValueError("data_sources, solution_strs and ground_truths must have one entry per response")
    results: list[dict[str, float] | None] = [None] * len(data_sources)
    for env_id in dict.fromkeys(data_sources):
        indices = [i for i, source in enumerate(data_sources) if source == env_id]
        scored = _scorer(env_id).score_many([(solution_strs[i], _seed(ground_truths[i])) for i in indices])
        for i, one in zip(indices, scored, strict=True):
            results[i] = _verl_score(one)
    return [result for result in results if result is not None]


# -- data --------------------------------------------------------------------------------
def dataset_rows(
    env_ids: str | Iterable[str],
    n: int,
    *,
    seed: int = 0,
    split: str = "train",
    tools: Iterable[str] = (),
    agent_name: str | None = None,
) -> list[dict[str, Any]]:
    """``n`` rows per env id (seeds ``seed .. seed+n-1``) in verl's dataset shape: the task's
    first observation as the user message, the seed as ``reward_model.ground_truth``.
    ``tools`` names the verl tools a trajectory may call (their ``tools_kwargs``);
    ``agent_name`` the agent loop that plays the row (:data:`AGENT_NAME` plays the env)."""
    tools = list(tools)
    rows: list[dict[str, Any]] = []
    for env_id in [env_ids] if isinstance(env_ids, str) else list(env_ids):
        for row in _scorer(env_id).rows(n, seed):
            task = {"env_id": env_id, "seed": row["seed"]}
            extra_info: dict[str, Any] = {"index": len(rows), "split": split, **task}
            if tools:  # create_kwargs reach each instance's create(); parquet has no empty structs
                extra_info["tools_kwargs"] = {name: {"create_kwargs": task} for name in tools}
            rows.append(
                {
                    "data_source": env_id,
                    "prompt": [{"role": "user", "content": row["prompt"]}],
                    "ability": env_id.partition(":")[0],
                    "reward_model": {"style": "rule", "ground_truth": str(row["seed"])},
                    "extra_info": extra_info,
                    **({"agent_name": agent_name} if agent_name else {}),
                }
            )
    return rows


def write_parquet(path: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` where verl's ``data.train_files`` / ``data.val_files`` read them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(list(rows)), path)


# -- agent loop --------------------------------------------------------------------------
AGENT_NAME = "gem_sandbox_env"


@register(AGENT_NAME)
class GemEnvAgentLoop(AgentLoopBase):
    """A multi-turn episode of the row's env: generate, step the env with the decoded reply,
    append its observation as a user turn, until the env ends the episode, ``max_turns``
    replies were made or the response is ``response_length`` tokens long. The sum of the step
    rewards is the sample's ``reward_score``; ``extra_fields`` carry the per-step rewards and
    the env's final status (``infra_error``: mask the sample).

    Extra keys of the agent loop config entry arrive as keywords: ``wrappers`` (GEM's wrapper
    names, e.g. ``python_tool``) and ``max_turns``. The env and its tools run on gem-sandbox's
    process default runtime, reached through its sync faces in worker threads.
    """

    def __init__(self, *args: Any, wrappers: str = "", max_turns: int = 8, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        get_wrapper_fns(wrappers)  # an unknown name fails when the loop is built, not mid-rollout
        self.wrappers = wrappers
        self.max_turns = int(max_turns)
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        env_id, seed = _task(kwargs.get("extra_info"))
        env = await self._call(self._make_env, env_id)
        rewards: list[float] = []
        status = "max_turns"
        try:
            obs, _ = await self._call(functools.partial(env.reset, seed=seed))
            messages = [{"role": "user", "content": str(obs)}]
            token_ids = await self.ct_build_initial_tokens(messages)
            mask: list[int] = []
            for _ in range(self.max_turns):
                output = await self.server_manager.generate(
                    request_id=uuid.uuid4().hex, prompt_ids=token_ids, sampling_params=sampling_params
                )
                merged, mask, _ = await self.ct_merge_assistant_token(token_ids, output.token_ids, mask)
                token_ids = merged.token_ids
                reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
                messages.append({"role": "assistant", "content": reply})
                obs, reward, terminated, truncated, info = await self._call(env.step, reply)
                rewards.append(float(reward))
                if terminated or truncated:
                    status = str(info.get("status") or "done")
                    break
                if len(mask) >= self.response_length:
                    status = "response_length"
                    break
                updated = [*messages, {"role": "user", "content": str(obs)}]
                merged, mask, _ = await self.ct_merge_context_msg(messages, updated, token_ids, mask)
                token_ids, messages = merged.token_ids, updated
        finally:
            await self._call(env.close)
        split = len(token_ids) - len(mask)
        return AgentLoopOutput(
            prompt_ids=token_ids[:split],
            response_ids=token_ids[split:][: self.response_length],
            response_mask=mask[: self.response_length],
            reward_score=sum(rewards),
            num_turns=len(messages),
            metrics={},
            extra_fields={"turn_scores": rewards, "tool_rewards": [], "env_status": status},
        )

    def _make_env(self, env_id: str) -> Env:
        return Scorer(env_id, wrappers=self.wrappers).make_env()

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A blocking env call off verl's event loop (the env's own loop is gem-sandbox's)."""
        return await self.loop.run_in_executor(None, functools.partial(fn, *args))


def _task(extra_info: Any) -> tuple[str, int]:
    try:
        return str(extra_info["env_id"]), int(extra_info["seed"])
    except (TypeError, KeyError, ValueError):
        raise ValueError(
            f"{AGENT_NAME} needs extra_info with env_id and seed (write rows with dataset_rows()), got {extra_info!r}"
        ) from None
