"""Turn per-step observations into the growing context a policy conditions on."""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar, TypeVar

from gem_sandbox.core import Env, EnvWrapper, ResetReturn, StepReturn, areset_env, astep_env

#: GEM's name for the type of a wrapper's observations.
WrapperObsType = TypeVar("WrapperObsType")


class ObservationWrapperError(ValueError, AssertionError):
    """A contradictory or incomplete ObservationWrapper configuration. GEM raises
    ``AssertionError`` for some of these and ``ValueError`` for others; this is both, so
    that code catching either of GEM's catches it."""


def maybe_add_new_line(text: str) -> str:
    """``text`` ending in a newline (GEM's helper): empty text stays empty."""
    return text if not text or text.endswith("\n") else text + "\n"


class ObservationWrapper(EnvWrapper):
    """Replaces each observation with the episode so far.

    * ``include_action=False``: the observations, concatenated (GEM's ``concat``);
    * ``include_action=True``: observations interleaved with the parsed actions
      (``concat_with_action``);
    * ``include_chat_template=True``: the same as chat messages rendered by
      ``tokenizer.apply_chat_template`` (``concat_chat``); tool answers get the ``tool`` role.

    ``max_history_length`` keeps only the last N turns. ``info["prefix"]`` and
    ``info["suffix"]`` are added around the result, as in GEM.

    The history is the wrapper's state: ``get_state``/``set_state`` carry it and copies
    (``spawn``, ``copy.deepcopy``) get their own; they share the tokenizer.
    """

    _state_attrs: ClassVar[tuple[str, ...]] = ("obs_queue", "act_queue")
    _shared_attrs: ClassVar[tuple[str, ...]] = ("tokenizer",)

    def __init__(
        self,
        env: Env,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Any = None,
    ) -> None:
        super().__init__(env)
        if include_chat_template and apply_chat_template_on_reset:
            raise ObservationWrapperError("include_chat_template and apply_chat_template_on_reset are exclusive")
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise ObservationWrapperError("a chat template needs a tokenizer: pass tokenizer=...")
        if include_chat_template and not include_action:
            raise ObservationWrapperError("a chat template needs include_action=True")
        self.include_action = include_action
        self.include_chat_template = include_chat_template
        self.apply_chat_template_on_reset = apply_chat_template_on_reset
        self.max_history_length = max_history_length
        self.tokenizer = tokenizer
        self.obs_queue: deque[tuple[str, bool]] = deque(
            maxlen=max_history_length + 1 if max_history_length else None
        )
        self.act_queue: deque[str] = deque(maxlen=max_history_length)

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self._on_reset(*self.env.reset(seed=seed, **kwargs))

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self._on_reset(*await areset_env(self.env, seed=seed, **kwargs))

    def step(self, action: Any) -> StepReturn:
        return self._on_step(action, *self.env.step(action))

    async def astep(self, action: Any) -> StepReturn:
        return self._on_step(action, *await astep_env(self.env, action))

    def observation(self, info: dict[str, Any]) -> str:
        """The context for the history so far (GEM's name): what ``reset`` and ``step``
        return, with ``info``'s prefix and suffix."""
        observations = list(self.obs_queue)
        if self.include_chat_template:
            messages = []
            for (obs, use_tool), act in zip(observations, self.act_queue):
                messages += [{"role": "tool" if use_tool else "user", "content": obs},
                             {"role": "assistant", "content": act}]
            last, use_tool = observations[-1]
            messages.append({"role": "tool" if use_tool else "user", "content": last})
            text = self._render(messages)
        elif self.include_action:
            text = "".join(
                maybe_add_new_line(o) + maybe_add_new_line(a) for (o, _), a in zip(observations, self.act_queue)
            )
            text += maybe_add_new_line(observations[-1][0])
        else:
            text = "".join(maybe_add_new_line(o) for o, _ in observations)
        return info.get("prefix", "") + text + info.get("suffix", "")

    def _on_reset(self, obs: str, info: dict[str, Any]) -> ResetReturn:
        self.obs_queue.clear()
        self.act_queue.clear()
        if self.apply_chat_template_on_reset:
            obs = self._render([{"role": "user", "content": obs}])
        self.obs_queue.append((obs, bool(info.get("use_tool", False))))
        return self.observation(info), info

    def _on_step(self, action: Any, obs: str, reward: Any, terminated: bool, truncated: bool, info: dict) -> StepReturn:
        self.act_queue.append(info.get("parsed_action", action))
        self.obs_queue.append((obs, bool(info.get("use_tool", False))))
        return self.observation(info), reward, terminated, truncated, info

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
