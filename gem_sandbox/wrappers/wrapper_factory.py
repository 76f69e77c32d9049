"""GEM's wrapper factory (``gem.wrappers.wrapper_factory``): a wrapper per name, composed with
``get_wrapper_fns("python_tool,concat_chat", tokenizer)``.

As in GEM, ``WRAPPER_FACTORY[name]`` is called with the env and returns the wrapped env
(``WRAPPER_FACTORY["concat_chat"](env, tokenizer=tok)``), and ``get_wrapper_fns`` returns one
such callable per name. Each name builds what gem-llm 0.1.0's does (rewards,
``max_tool_uses=5``, ``timeout=5``), and its tool wrapper behaves as GEM's; a tool entry also
takes ``runtime=`` and the wrapper's opt-in extensions (``json_tool_calls=True``, ...), and
any :class:`ToolEnvWrapper` argument (``tools=``, ``tool_reward=``...) overrides the entry's.

Order matters when composing: a tool wrapper first, then an observation wrapper, then
``episode_tracking`` outermost. Unlike GEM, which shares one tool between every env a call
wraps, a tool wrapper builds its own tools for each env: the wrapper owns and closes them, so
closing one env cannot close a tool another still uses. Their sandboxes (and the search tool's
HTTP session) come from ``runtime``: the caller's :class:`~gem_sandbox.runtime.Runtime`, or,
for sync callers, the process default, and close with it. The tools' modules load with the
first tool wrapper built, so the observation wrappers never load sandbox code.

The search tool searches the env's own corpus when the env carries one: an env whose
questions are about a corpus it ships exposes ``search_index`` on its unwrapped env (the path
of a built :mod:`gem_sandbox.search.index` index, or a :class:`SearchIndex`; None or absent
when it has none), and the search wrappers hand that to the tool, with no server. That index
wins over ``$SEARCH_URL``: a general retrieval server cannot answer questions about a private
corpus. Envs without one search ``$SEARCH_URL`` as in GEM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from gem_sandbox.core import Env
from gem_sandbox.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem_sandbox.wrappers.observation_wrapper import ObservationWrapper

if TYPE_CHECKING:
    from gem_sandbox.runtime import Runtime
    from gem_sandbox.sync import SyncRuntime
    from gem_sandbox.tools.base import Tool

WrapperFn = Callable[[Env], Env]


class ToolWrapperEntry:
    """A tool name's factory entry: ``entry(env, runtime=None, **options)`` wraps ``env`` in a
    :class:`ToolEnvWrapper` with a tool of its own, made for that env on ``runtime``."""

    def __init__(self, make_tool: Callable[[Any, Env], Tool], tool_reward: float, tool_success_reward: float) -> None:
        self.make_tool = make_tool
        self.tool_reward = tool_reward
        self.tool_success_reward = tool_success_reward

    def __call__(self, env: Env, runtime: Runtime | SyncRuntime | None = None, **options: Any) -> Env:
        from gem_sandbox.tools.tool_env_wrapper import ToolEnvWrapper  # sandbox code loads with the first tool wrapper

        settings: dict[str, Any] = {
            "tool_reward": self.tool_reward,
            "tool_success_reward": self.tool_success_reward,
            "max_tool_uses": 5,
            **options,
        }
        if "tools" not in settings:
            settings["tools"] = [self.make_tool(runtime, env)]
        return ToolEnvWrapper(env, **settings)


def _python_tool(**settings: Any) -> Callable[[Any, Env], Tool]:
    def make(runtime: Any, env: Env) -> Tool:
        from gem_sandbox.tools.python_code_tool import PythonCodeTool

        return PythonCodeTool(timeout=5, runtime=runtime, **settings)

    return make


def _calculator_tool(runtime: Any, env: Env) -> Tool:
    from gem_sandbox.tools.calculator import CalculatorTool

    return CalculatorTool()


def _search_tool(runtime: Any, env: Env) -> Tool:
    """GEM's search tool for ``env``: on the env's own corpus index when it has one (the
    duck-typed ``search_index`` of the unwrapped env), else on ``$SEARCH_URL``."""
    from gem_sandbox.tools.search_tool import SearchTool

    index = getattr(env.unwrapped, "search_index", None)
    return SearchTool(topk=3, timeout=5, index=index, runtime=runtime)


WRAPPER_FACTORY: dict[str, Callable[..., Env]] = {
    "python_tool": ToolWrapperEntry(_python_tool(), 0.05, 0.25),
    "python_tool_no_int_reward": ToolWrapperEntry(_python_tool(), 0.0, 0.0),
    "python_tool_no_int_reward_last_line_error": ToolWrapperEntry(_python_tool(keep_error_last_line=True), 0.0, 0.0),
    "calculator_tool": ToolWrapperEntry(_calculator_tool, 0.05, 0.25),
    "search_tool": ToolWrapperEntry(_search_tool, 0.3, 0.0),
    "search_tool_no_int_reward": ToolWrapperEntry(_search_tool, 0.0, 0.0),
    "concat": partial(ObservationWrapper, include_action=False, include_chat_template=False),
    "concat_with_action": partial(ObservationWrapper, include_action=True, include_chat_template=False),
    "concat_chat": partial(ObservationWrapper, include_action=True, include_chat_template=True),
    "concat_chat_on_reset": partial(
        ObservationWrapper, include_action=True, include_chat_template=False, apply_chat_template_on_reset=True
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}
TOKENIZER_REQUIRED = frozenset({"concat_chat", "concat_chat_on_reset"})


def get_wrapper_fns(
    wrappers: str,
    tokenizer: Any = None,
    *,
    runtime: Runtime | SyncRuntime | None = None,
    tool_options: Mapping[str, Any] | None = None,
) -> list[WrapperFn]:
    """One callable per comma-separated factory name, each wrapping the env it is given;
    tool wrappers run their tools on ``runtime`` and take ``tool_options``
    (:class:`ToolEnvWrapper`'s opt-in extensions, e.g. ``{"json_tool_calls": True}``; none by
    default: GEM's behaviour). A chat wrapper without a tokenizer is refused here, not at
    its first reset."""
    fns: list[WrapperFn] = []
    for name in filter(None, (w.strip() for w in (wrappers or "").split(","))):
        entry = WRAPPER_FACTORY.get(name)
        if entry is None:
            raise KeyError(f"unknown wrapper {name!r}; known: {', '.join(sorted(WRAPPER_FACTORY))}")
        if isinstance(entry, ToolWrapperEntry):
            fns.append(partial(entry, runtime=runtime, **(tool_options or {})))
        elif name in TOKENIZER_REQUIRED:
            if tokenizer is None:
                raise ValueError(f"wrapper {name!r} needs a tokenizer: get_wrapper_fns(..., tokenizer=tok)")
            fns.append(partial(entry, tokenizer=tokenizer))
        else:
            fns.append(entry)
    return fns
