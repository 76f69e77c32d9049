"""GEM's wrapper-factory names: ``get_wrapper_fns("python_tool,concat_chat", tokenizer)``.

Order matters when composing: a tool wrapper first, then an observation wrapper, then
``episode_tracking`` outermost. As in GEM, each name's tools are built once and shared by every
env it wraps; the tools keep no per-episode state, so sharing them is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from gem_sandbox.core import Env
from gem_sandbox.tools.calculator import CalculatorTool
from gem_sandbox.tools.python import PythonCodeTool
from gem_sandbox.tools.search import SearchTool
from gem_sandbox.wrappers.episode_tracking import EpisodeTrackingWrapper
from gem_sandbox.wrappers.observation import ObservationWrapper
from gem_sandbox.wrappers.tool_env import ToolEnvWrapper

WrapperFn = Callable[[Env], Env]

WRAPPER_FACTORY: dict[str, Callable[..., Env]] = {
    "python_tool": partial(
        ToolEnvWrapper, tools=[PythonCodeTool(timeout=5)], tool_reward=0.05, tool_success_reward=0.25, max_tool_uses=5
    ),
    "python_tool_no_int_reward": partial(
        ToolEnvWrapper, tools=[PythonCodeTool(timeout=5)], tool_reward=0.0, tool_success_reward=0.0, max_tool_uses=5
    ),
    "python_tool_no_int_reward_last_line_error": partial(
        ToolEnvWrapper,
        tools=[PythonCodeTool(timeout=5, keep_error_last_line=True)],
        tool_reward=0.0,
        tool_success_reward=0.0,
        max_tool_uses=5,
    ),
    "calculator_tool": partial(
        ToolEnvWrapper, tools=[CalculatorTool()], tool_reward=0.05, tool_success_reward=0.25, max_tool_uses=5
    ),
    "search_tool": partial(
        ToolEnvWrapper, tools=[SearchTool(topk=3, timeout=5)], tool_reward=0.3, tool_success_reward=0.0, max_tool_uses=5
    ),
    "search_tool_no_int_reward": partial(
        ToolEnvWrapper, tools=[SearchTool(topk=3, timeout=5)], tool_reward=0.0, tool_success_reward=0.0, max_tool_uses=5
    ),
    "concat": partial(ObservationWrapper, include_action=False, include_chat_template=False),
    "concat_with_action": partial(ObservationWrapper, include_action=True, include_chat_template=False),
    "concat_chat": partial(ObservationWrapper, include_action=True, include_chat_template=True),
    "concat_chat_on_reset": partial(
        ObservationWrapper, include_action=True, include_chat_template=False, apply_chat_template_on_reset=True
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}
TOKENIZER_REQUIRED = frozenset({"concat_chat", "concat_chat_on_reset"})


def get_wrapper_fns(wrappers: str, tokenizer: Any = None) -> list[WrapperFn]:
    """Wrapper constructors for a comma-separated list of factory names."""
    fns: list[WrapperFn] = []
    for name in filter(None, (w.strip() for w in (wrappers or "").split(","))):
        if name not in WRAPPER_FACTORY:
            raise KeyError(f"unknown wrapper {name!r}; known: {', '.join(sorted(WRAPPER_FACTORY))}")
        fn = WRAPPER_FACTORY[name]
        if name in TOKENIZER_REQUIRED:
            if tokenizer is None:
                raise ValueError(f"wrapper {name!r} needs a tokenizer: get_wrapper_fns(..., tokenizer=tok)")
            fn = partial(fn, tokenizer=tokenizer)
        fns.append(fn)
    return fns
