"""Turn per-step observations into the growing context a policy conditions on."""

from __future__ import annotations

from collections import deque
from typing import Any

from gem_sandbox.core import Env, EnvWrapper, ResetReturn, StepReturn


def _with_newline(text: str) -> str:
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
    """

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
            raise ValueError("include_chat_template and apply_chat_template_on_reset are exclusive")
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise ValueError("a chat template needs a tokenizer: pass tokenizer=...")
        if include_chat_template and not include_action:
            raise ValueError("a chat template needs include_action=True")
        self.include_action = include_action
        self.include_chat_template = include_chat_template
        self.apply_chat_template_on_reset = apply_chat_template_on_reset
        self.tokenizer = tokenizer
        self.obs_queue: deque[tuple[str, bool]] = deque(
            maxlen=max_history_length + 1 if max_history_length else None
        )
        self.act_queue: deque[str] = deque(maxlen=max_history_length)

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self._on_reset(*self.env.reset(seed=seed, **kwargs))

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        return self._on_reset(*await self.env.areset(seed=seed, **kwargs))

    def step(self, action: Any) -> StepReturn:
        return self._on_step(action, *self.env.step(action))

    async def astep(self, action: Any) -> StepReturn:
        return self._on_step(action, *await self.env.astep(action))

    def _on_reset(self, obs: str, info: dict[str, Any]) -> ResetReturn:
        self.obs_queue.clear()
        self.act_queue.clear()
        if self.apply_chat_template_on_reset:
            obs = self._render([{"role": "user", "content": obs}])
        self.obs_queue.append((obs, bool(info.get("use_tool", False))))
        return self._context(info), info

    def _on_step(self, action: Any, obs: str, reward: Any, terminated: bool, truncated: bool, info: dict) -> StepReturn:
        self.act_queue.append(info.get("parsed_action", action))
        self.obs_queue.append((obs, bool(info.get("use_tool", False))))
        return self._context(info), reward, terminated, truncated, info

    def _context(self, info: dict[str, Any]) -> str:
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
            text = "".join(_with_newline(o) + _with_newline(a) for (o, _), a in zip(observations, self.act_queue))
            text += _with_newline(observations[-1][0])
        else:
            text = "".join(_with_newline(o) for o, _ in observations)
        return info.get("prefix", "") + text + info.get("suffix", "")

    def _render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
