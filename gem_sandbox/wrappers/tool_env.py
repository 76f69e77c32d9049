"""Intercept tool calls in the model's action; pass everything else to the env."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gem_sandbox._loop import run_sync
from gem_sandbox.core import Env, EnvWrapper, ResetReturn, StepReturn
from gem_sandbox.tools.base import Tool

MAX_USES_MESSAGE = "\n\nReached the maximum number of tool use. Please output final answer directly."


class ToolEnvWrapper(EnvWrapper):
    """Runs the first complete tool call in each action and returns its output as the next
    observation; an action without a tool call (or past ``max_tool_uses``) goes to the env.

    Rewards ``tool_reward`` per parsed call and ``tool_success_reward`` more when it succeeds.
    Info keys follow GEM: ``tool_use_counter``, ``tool_success_counter``, their ``prev_ep_``
    forms on reset, ``use_tool``, ``parsed_action`` and ``tool_type``. Unlike GEM, ``use_tool``
    is True only for steps that a tool answered, so chat templates give those the tool role.
    """

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        max_tool_uses: int | None = 10,
    ) -> None:
        super().__init__(env)
        self.tools = list(tools)
        self.tool_reward = tool_reward
        self.tool_success_reward = tool_success_reward
        self.max_tool_uses = float("inf") if max_tool_uses is None else max_tool_uses
        self.tool_use_counter = 0
        self.tool_success_counter = 0

    @property
    def blocking(self) -> bool:  # type: ignore[override]
        return False  # the async face is native; sync callers go through the shared loop

    @property
    def suspends(self) -> bool:  # type: ignore[override]
        return True  # tools wait on sandboxes

    def instruction_string(self) -> str:
        lines = "\n".join(tool.instruction_string() for tool in self.tools)
        return f"Available tools:\n{lines}" if len(self.tools) > 1 else lines

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        prev_uses, prev_successes = self.tool_use_counter, self.tool_success_counter
        self.tool_use_counter = self.tool_success_counter = 0
        obs, info = await self.env.areset(seed=seed, **kwargs)
        info.update(
            tool_use_counter=0,
            tool_success_counter=0,
            prev_ep_tool_use_counter=prev_uses,
            prev_ep_tool_success_counter=prev_successes,
            use_tool=False,
        )
        return f"{obs}\n{self.instruction_string()}", info

    async def astep(self, action: Any) -> StepReturn:
        calls = []
        if self.tool_use_counter < self.max_tool_uses:
            calls = [(call, tool) for tool in self.tools if (call := tool.parse(action)) is not None]
        if not calls:
            obs, reward, terminated, truncated, info = await self.env.astep(action)
            info.update(use_tool=False)
        else:
            call, tool = min(calls, key=lambda pair: pair[0].end)
            output = await tool.aexecute(call)
            self.tool_use_counter += 1
            reward = self.tool_reward
            if not output.error:
                self.tool_success_counter += 1
                reward += self.tool_success_reward
            obs = output.observation
            if self.tool_use_counter == self.max_tool_uses:
                obs += MAX_USES_MESSAGE
            terminated = truncated = False
            info = {"parsed_action": call.parsed_action, "tool_type": tool.tool_type, "use_tool": True}
        info.update(tool_use_counter=self.tool_use_counter, tool_success_counter=self.tool_success_counter)
        return obs, reward, terminated, truncated, info

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return run_sync(self.areset, seed, **kwargs)

    def step(self, action: Any) -> StepReturn:
        return run_sync(self.astep, action)

    def get_state(self) -> dict[str, Any]:
        return {
            **self.env.get_state(),
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.tool_use_counter = state.pop("tool_use_counter", 0)
        self.tool_success_counter = state.pop("tool_success_counter", 0)
        self.env.set_state(state)
