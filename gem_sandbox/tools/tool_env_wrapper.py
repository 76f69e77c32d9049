"""GEM's ``gem.tools.tool_env_wrapper``: intercept tool calls in the model's action; pass
everything else to the env."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

from gem_sandbox.bridge import run_sync
from gem_sandbox.core import (
    Env,
    EnvWrapper,
    ResetReturn,
    StepReturn,
    aclose_env,
    areset_env,
    astep_env,
    get_state_of,
    set_state_of,
)
from gem_sandbox.tools.base import Tool, ToolCall, ToolOutput
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.parsing import ToolCallError, find_call, parse_json_call

MAX_USES_MESSAGE = "\n\nReached the maximum number of tool use. Please output final answer directly."
INVALID_CALL_TYPE = "invalid_tool_call"  # info["tool_type"] of a JSON call that named no usable tool


class ToolEnvWrapper(EnvWrapper):
    """Runs a tool call found in each action and returns its output as the next observation;
    an action without a tool call (or past ``max_tool_uses``) goes to the env.

    By default this is gem-llm's ``ToolEnvWrapper``: the tools are tried in their order, each
    on the call in its own format; a call that fails falls through to the next tool that finds
    one, and the first success (else the last failure) answers. Unlike GEM, a failed call is
    never forgotten because a later tool found nothing: GEM then steps the env with the action
    (a bug that only lists of several tools reach). Options, each off by default, extend it:

    * ``json_tool_calls``: a JSON ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
      naming a tool is a call to it too (the earlier in the text of it and the tool's own
      format counts); one that names no tool or is malformed is answered with an error
      observation, a use that failed, when no tool found a call. Tool names must then be
      unique.
    * ``earliest_call_wins``: only the call that ends first in the action runs, whichever
      tool (or JSON call) it is for.
    * ``use_tool_on_env_steps=False``: ``info["use_tool"]`` is True only on steps a tool
      answered, so chat templates give the env's own observations the user role (GEM sets it
      on every step).

    Rewards ``tool_reward`` per call and ``tool_success_reward`` more when it succeeds.
    Info keys follow GEM: ``tool_use_counter``, ``tool_success_counter``, their ``prev_ep_``
    forms on reset, ``use_tool``, ``parsed_action`` and ``tool_type``; one more,
    ``tool_status``, gives a sandboxed call's run status (``infra_error`` marks a sample to
    mask, not to score).

    Per-episode sandbox state belongs here, not to the tools: the wrapper's
    :class:`~gem_sandbox.tools.episode.Episode` goes with every call, its sandbox is leased on
    the first stateful call and released when the episode ends, on reset and on close. Where
    the sandboxes come from is each tool's ``runtime``. In a vector env stepped in lockstep
    every stateful episode holds a sandbox, so give such runtimes ``max_size`` >= the number
    of envs.

    The wrapper owns the tools it is given: closing it closes them (a spawned copy shares
    them, so closing either does). Like the env, it refuses a step before ``reset``, after the
    episode ended or with an action that is not a string, before it runs or pays a tool call.
    """

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        max_tool_uses: int | None = 10,
        *,
        json_tool_calls: bool = False,
        earliest_call_wins: bool = False,
        use_tool_on_env_steps: bool = True,
    ) -> None:
        super().__init__(env)
        names = [tool.name for tool in tools]
        if json_tool_calls and len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique (JSON calls pick tools by name): {names}")
        self.tools = list(tools)
        self.tool_reward = tool_reward
        self.tool_success_reward = tool_success_reward
        self.max_tool_uses = float("inf") if max_tool_uses is None else max_tool_uses
        self.json_tool_calls = json_tool_calls
        self.earliest_call_wins = earliest_call_wins
        self.use_tool_on_env_steps = use_tool_on_env_steps
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        self.episode = Episode()

    @property
    def blocking(self) -> bool:  # type: ignore[override]
        return False  # the async face is native; sync callers go through gem_sandbox.bridge

    @property
    def suspends(self) -> bool:  # type: ignore[override]
        return True  # tools wait on sandboxes

    def instruction_string(self) -> str:
        lines = "\n".join(tool.instruction_string() for tool in self.tools)
        return f"Available tools:\n{lines}" if len(self.tools) > 1 else lines

    def tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schemas of the tools, e.g. for a chat template's ``tools=``."""
        return [tool.schema() for tool in self.tools]

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        await self.episode.release()
        prev_uses, prev_successes = self.tool_use_counter, self.tool_success_counter
        self.tool_use_counter = self.tool_success_counter = 0
        obs, info = await areset_env(self.env, seed=seed, **kwargs)
        info["tool_use_counter"] = 0  # GEM's keys, in GEM's order
        info["prev_ep_tool_use_counter"] = prev_uses
        info["tool_success_counter"] = 0
        info["prev_ep_tool_success_counter"] = prev_successes
        info["use_tool"] = False
        return f"{obs}\n{self.instruction_string()}", info

    async def astep(self, action: Any) -> StepReturn:
        self.check_step(action)  # a tool call never reaches the env's own guard
        answer = await self._answer(action) if self.tool_use_counter < self.max_tool_uses else None
        if answer is None:
            obs, reward, terminated, truncated, info = await astep_env(self.env, action)
            if terminated or truncated:
                await self.episode.release()
        else:
            call, output, tool_type = answer
            self.tool_use_counter += 1
            obs = output.observation
            if self.tool_use_counter == self.max_tool_uses:
                obs = f"{obs}{MAX_USES_MESSAGE}"
            reward = 0  # GEM's arithmetic, so the reward is GEM's to the last bit
            reward += self.tool_reward
            terminated = truncated = False
            info = {"parsed_action": call.parsed_action, "tool_type": tool_type}
            if "status" in output.details:
                info["tool_status"] = output.details["status"]
            if not output.error:
                self.tool_success_counter += 1
                reward += self.tool_success_reward
        info["tool_use_counter"] = self.tool_use_counter
        info["tool_success_counter"] = self.tool_success_counter
        info["use_tool"] = answer is not None or self.use_tool_on_env_steps
        return obs, reward, terminated, truncated, info

    async def _answer(self, action: str) -> tuple[ToolCall | ToolCallError, ToolOutput, str] | None:
        """The call that answers ``action``, its output and its ``tool_type``; None: no call."""
        if self.earliest_call_wins:
            call = find_call(action, self.tools, json_calls=self.json_tool_calls)
            if call is None:
                return None
            output, tool_type = await self._execute(call)
            return None if output.details.get("valid") is False else (call, output, tool_type)
        json_call = parse_json_call(action, {t.name: t for t in self.tools}) if self.json_tool_calls else None
        answer: tuple[ToolCall | ToolCallError, ToolOutput, str] | None = None
        for tool in self.tools:  # GEM's order: each tool in turn until one succeeds
            found = [tool.parse(action)]
            if isinstance(json_call, ToolCall) and json_call.tool == tool.name:
                found.append(json_call)
            call = min((c for c in found if c is not None), key=lambda c: c.end, default=None)
            if call is None:
                continue
            output = await tool.aexecute(call, self.episode)
            if output.details.get("valid") is False:  # a GEM-style tool found no call of its own
                continue
            if "parsed_action" in output.details:  # ... or said which part it read
                call = dataclasses.replace(call, parsed_action=output.details["parsed_action"])
            answer = (call, output, tool.tool_type)
            if not output.error:
                break
        if answer is None and isinstance(json_call, ToolCallError):
            return (json_call, *await self._execute(json_call))
        return answer

    async def _execute(self, call: ToolCall | ToolCallError) -> tuple[ToolOutput, str]:
        if isinstance(call, ToolCallError):
            return ToolOutput(f"Tool call error: {call.message}\n", error=True), INVALID_CALL_TYPE
        tool = next(tool for tool in self.tools if tool.name == call.tool)
        return await tool.aexecute(call, self.episode), tool.tool_type

    async def aclose(self) -> None:
        """Release the episode's sandboxes, then close the tools and the env, each even when
        an earlier one fails. Closing twice is safe, as each of those closes is."""
        async with contextlib.AsyncExitStack() as stack:  # runs its callbacks last pushed first
            stack.push_async_callback(aclose_env, self.env)
            for tool in reversed(self.tools):
                stack.push_async_callback(tool.aclose)
            stack.push_async_callback(self.episode.release)

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return run_sync(self.areset, seed, **kwargs)

    def step(self, action: Any) -> StepReturn:
        return run_sync(self.astep, action)

    def close(self) -> None:
        run_sync(self.aclose)

    async def afork(self, n: int) -> list[Env]:
        """Copies that carry this episode on, each with a fork of the episode's sandboxes
        (files, kernels and shells as they are now) and the tool counters so far."""
        episodes = await self.episode.fork(n)
        try:
            clones = await super().afork(n)
        except BaseException:
            for episode in episodes:
                await episode.release()
            raise
        for clone, episode in zip(clones, episodes, strict=True):
            assert isinstance(clone, ToolEnvWrapper)
            clone.episode = episode
        return clones

    def _spawn_copy(self) -> ToolEnvWrapper:
        clone = super()._spawn_copy()
        assert isinstance(clone, ToolEnvWrapper)
        clone.episode = Episode()  # a sandbox is leased by one episode only
        return clone

    def get_state(self) -> dict[str, Any]:
        """The env's state and the tool counters (a sandbox's contents are not captured)."""
        return {
            **get_state_of(self.env),
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.tool_use_counter = state.pop("tool_use_counter", 0)
        self.tool_success_counter = state.pop("tool_success_counter", 0)
        set_state_of(self.env, state)
