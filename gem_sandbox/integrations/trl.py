"""TRL's GRPO, rewarded by gem-sandbox's scored envs: reward functions and the prompt dataset.

TRL's ``GRPOTrainer`` calls each of its ``reward_funcs`` as ``f(prompts=..., completions=...,
completion_ids=..., **columns)``, one list entry per generated completion, where ``columns``
are the dataset's other columns (here ``env_id`` and ``seed``, from :meth:`Scorer.rows`), and
logs each function's rewards under its ``__name__``. A completion is a string, or, for a
conversational dataset, a list of messages whose last assistant message is the answer.

:func:`reward_function` scores each completion on the task its row's seed picks, by
:class:`~gem_sandbox.integrations.scoring.Scorer` (a fresh env, reset to the seed, stepped once;
code runs in a sandbox). It answers None (TRL's "no reward here", left out of the means) for
rows of other envs, so one dataset can mix envs with one function per env, and for samples
whose sandbox failed (``infra_error``), which a trainer must not learn a zero from.
:func:`python_tool_reward` is the multi-turn-free tool variant: the completion is one step of a
``python_tool``-wrapped env, its code block run in a sandbox, and the reward is that step's
(GEM's tool rewards: a use, a success).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from datasets import Dataset

from gem_sandbox.integrations.scoring import Scored, Scorer
from gem_sandbox.sync import SyncRuntime

__all__ = ["RewardFunction", "completion_text", "dataset", "python_tool_reward", "reward_function"]

RewardFunction = Callable[..., list[float | None]]


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The answer in a TRL completion: the string itself, or the last assistant message's text
    (its ``content`` a string, or parts whose ``text`` is joined)."""
    if isinstance(completion, str):
        return completion
    replies = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    if not replies:
        raise ValueError("a conversational completion needs an assistant message; got none")
    content = replies[-1].get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))


def reward_function(scorer: Scorer, *, name: str | None = None, mask_infra_errors: bool = True) -> RewardFunction:
    """A GRPO reward function scoring on ``scorer``'s env (see the module's docstring).

    ``scorer`` must score from blocking code (a :class:`~gem_sandbox.SyncRuntime`, or None for
    the process default): TRL calls reward functions from its training loop. ``name`` (default
    ``gem:<env id>``) is what TRL logs the rewards under. The function's ``history`` keeps one
    list per call (a training step's batch), of ``(seed, completion text, Scored)`` for the
    rows it scored, for audits.
    """
    if not isinstance(scorer.runtime, SyncRuntime | None):
        raise TypeError("TRL calls reward functions from blocking code: give the Scorer a SyncRuntime")
    history: list[list[tuple[int, str, Scored]]] = []

    def reward(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        *,
        env_id: Sequence[str],
        seed: Sequence[int],
        **_: Any,  # TRL's completion_ids, trainer_state, other dataset columns
    ) -> list[float | None]:
        if not len(completions) == len(env_id) == len(seed):
            raise ValueError(
                f"{len(completions)} completions but {len(env_id)} env ids and {len(seed)} seeds: "
                "the dataset needs env_id and seed columns (gem_sandbox.integrations.trl.dataset builds it)"
            )
        mine = [i for i, env in enumerate(env_id) if env == scorer.env_id]
        texts = {i: completion_text(completions[i]) for i in mine}
        scored = scorer.score_many([(texts[i], int(seed[i])) for i in mine])
        rewards: list[float | None] = [None] * len(completions)
        history.append([(int(seed[i]), texts[i], score) for i, score in zip(mine, scored, strict=True)])
        for i, score in zip(mine, scored, strict=True):
            rewards[i] = None if mask_infra_errors and score.infra_error else score.reward
        return rewards

    reward.__name__ = reward.__qualname__ = name or f"gem:{scorer.env_id}"
    reward.history = history  # type: ignore[attr-defined]
    reward.scorer = scorer  # type: ignore[attr-defined]
    return reward


def python_tool_reward(
    env_id: str,
    *,
    runtime: SyncRuntime | None = None,
    tool_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    **env_kwargs: Any,
) -> RewardFunction:
    """A reward function playing one step of ``env_id`` wrapped in ``python_tool``: the
    completion's code block runs in a sandbox and the step's reward is the completion's."""
    scorer = Scorer(env_id, runtime=runtime, wrappers="python_tool", tool_options=tool_options, **env_kwargs)
    return reward_function(scorer, name=name or f"gem:{env_id}+python_tool")


def dataset(
    scorers: Scorer | Sequence[Scorer],
    n: int,
    *,
    seed: int = 0,
    conversational: bool = False,
    prompt: Callable[[str], str] | None = None,
) -> Dataset:
    """A GRPO training set: ``n`` rows from each scorer (seeds ``seed .. seed+n-1``), each
    ``{"prompt", "env_id", "seed"}``. ``prompt`` rewrites each observation (a template, a
    suffix); ``conversational`` makes the prompt one user message, for chat models."""
    rows = [row for s in ([scorers] if isinstance(scorers, Scorer) else scorers) for row in s.rows(n, seed)]
    for row in rows:
        text = prompt(row["prompt"]) if prompt is not None else row["prompt"]
        row["prompt"] = [{"role": "user", "content": text}] if conversational else text
    return Dataset.from_list(rows)
