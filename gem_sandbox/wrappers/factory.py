"""GEM's wrapper-factory names: ``get_wrapper_fns("python_tool,concat_chat", tokenizer)``.

Each name builds what gem-llm 0.1.0's does (rewards, ``max_tool_uses=5``, ``timeout=5``), and
its tool wrapper behaves as GEM's; ``tool_options`` opts into the wrapper's extensions.

Order matters when composing: a tool wrapper first, then an observation wrapper, then
``episode_tracking`` outermost. Unlike GEM, which shares one tool between every env a call
wraps, a tool wrapper builds its own tools for each env: the wrapper owns and closes them, so
closing one env cannot close a tool another still uses. Their sandboxes (and the search tool's
HTTP session) come from ``runtime``: the caller's :class:`~gem_sandbox.runtime.Runtime`, or,
for sync callers, the process default, and close with it.

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
from typing import Any

from gem_sandbox.core import Env
from gem_sandbox.runtime import Runtime
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools.base import Tool
from gem_sandbox.tools.calculator import CalculatorTool
from gem_sandbox.tools.python import PythonCodeTool
from gem_sandbox.tools.search import SearchTool
from gem_sandbox.wrappers.episode_tracking import EpisodeTrackingWrapper
from gem_sandbox.wrappers.observation import ObservationWrapper
from gem_sandbox.wrappers.tool_env import ToolEnvWrapper

WrapperFn = Callable[[Env], Env]
AnyRuntime = Runtime | SyncRuntime | None


def _tool_wrapper(
    make_tool: Callable[[AnyRuntime, Env], Tool], tool_reward: float, tool_success_reward: float
) -> Callable[..., WrapperFn]:
    """A factory entry for a tool wrapper on the caller's runtime; each env it wraps gets a
    tool of its own, made for that env and owned by its wrapper. ``options`` are the
    wrapper's extensions (``json_tool_calls=True``, ...); none: GEM's wrapper."""

    def build(runtime: AnyRuntime = None, **options: Any) -> WrapperFn:
        def wrap(env: Env) -> Env:
            return ToolEnvWrapper(
                env,
                tools=[make_tool(runtime, env)],
                tool_reward=tool_reward,
                tool_success_reward=tool_success_reward,
                max_tool_uses=5,
                **options,
            )

        return wrap

    return build


def _search_tool(runtime: AnyRuntime, env: Env) -> SearchTool:
    """GEM's search tool for ``env``: on the env's own corpus index when it has one (the
    duck-typed ``search_index`` of the unwrapped env), else on ``$SEARCH_URL``."""
    index = getattr(env.unwrapped, "search_index", None)
    return SearchTool(topk=3, timeout=5, index=index, runtime=runtime)


def _plain(fn: Callable[..., Env]) -> Callable[..., WrapperFn]:
    """A factory entry for a wrapper without tools, which needs no runtime (``options``: the
    tokenizer of the chat wrappers)."""

    def build(runtime: AnyRuntime = None, **options: Any) -> WrapperFn:
        return partial(fn, **options)

    return build


WRAPPER_FACTORY: dict[str, Callable[..., WrapperFn]] = {
    "python_tool": _tool_wrapper(lambda rt, env: PythonCodeTool(timeout=5, runtime=rt), 0.05, 0.25),
    "python_tool_no_int_reward": _tool_wrapper(lambda rt, env: PythonCodeTool(timeout=5, runtime=rt), 0.0, 0.0),
    "python_tool_no_int_reward_last_line_error": _tool_wrapper(
        lambda rt, env: PythonCodeTool(timeout=5, keep_error_last_line=True, runtime=rt), 0.0, 0.0
    ),
    "calculator_tool": _tool_wrapper(lambda rt, env: CalculatorTool(), 0.05, 0.25),
    "search_tool": _tool_wrapper(_search_tool, 0.3, 0.0),
    "search_tool_no_int_reward": _tool_wrapper(_search_tool, 0.0, 0.0),
    "concat": _plain(partial(ObservationWrapper, include_action=False, include_chat_template=False)),
    "concat_with_action": _plain(partial(ObservationWrapper, include_action=True, include_chat_template=False)),
    "concat_chat": _plain(partial(ObservationWrapper, include_action=True, include_chat_template=True)),
    "concat_chat_on_reset": _plain(
        partial(ObservationWrapper, include_action=True, include_chat_template=False, apply_chat_template_on_reset=True)
    ),
    "episode_tracking": _plain(EpisodeTrackingWrapper),
}
TOKENIZER_REQUIRED = frozenset({"concat_chat", "concat_chat_on_reset"})


TOOL_WRAPPERS = frozenset(
    {
        "python_tool",
        "python_tool_no_int_reward",
        "python_tool_no_int_reward_last_line_error",
        "calculator_tool",
        "search_tool",
        "search_tool_no_int_reward",
    }
)


def get_wrapper_fns(
    wrappers: str,
    tokenizer: Any = None,
    *,
    runtime: AnyRuntime = None,
    tool_options: Mapping[str, Any] | None = None,
) -> list[WrapperFn]:
    """Wrapper constructors for a comma-separated list of factory names; tool wrappers run
    their tools on ``runtime`` and take ``tool_options`` (:class:`ToolEnvWrapper`'s opt-in
    extensions, e.g. ``{"json_tool_calls": True}``; none by default: GEM's behaviour)."""
    fns: list[WrapperFn] = []
    for name in filter(None, (w.strip() for w in (wrappers or "").split(","))):
        if name not in WRAPPER_FACTORY:
            raise KeyError(f"unknown wrapper {name!r}; known: {', '.join(sorted(WRAPPER_FACTORY))}")
        options: dict[str, Any] = dict(tool_options or {}) if name in TOOL_WRAPPERS else {}
        if name in TOKENIZER_REQUIRED:
            if tokenizer is None:
                raise ValueError(f"wrapper {name!r} needs a tokenizer: get_wrapper_fns(..., tokenizer=tok)")
            options["tokenizer"] = tokenizer
        fns.append(WRAPPER_FACTORY[name](runtime, **options))
    return fns
