"""Evaluate a model served behind an OpenAI-compatible chat endpoint on a catalogue env:
what ``gem-sandbox eval`` runs.

Each episode is a chat: the env's first observation is the user's message, each reply of the
model is the env's action, and each later observation (a tool's output, a game's answer) is the
next user message, until the env ends the episode. Tasks are seeds (``seed``, ``seed + 1``,
...); each is played ``samples`` times for pass@k. Every episode of a run shares one
:class:`~gem_sandbox.Runtime` on this event loop, so tools and scoring run on one pool.

What counts: an episode is *scored* unless its model call failed (``model_error``: the
endpoint answered an error or nothing usable) or its infrastructure did (``infra_error``: a
sandbox failed, as trainers mask it); both are counted apart, never as a reward of 0. An
episode *passes* when its last reward is 1.0 or more: what the scored envs (code, math, qa, rg)
and the games give a solved task. pass@k is the unbiased estimator of Chen et al. (2021),
``1 - C(n - c, k) / C(n, k)`` over each task's ``n`` scored samples of which ``c`` passed,
averaged over the tasks with at least ``k`` scored samples.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
import anyio

from gem_sandbox.core import Env
from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.runtime import Runtime

__all__ = ["EpisodeRecord", "EvalConfig", "EvalError", "ModelClient", "Summary", "evaluate", "pass_at_k", "summarize"]

MODEL_ERROR = "model_error"
INFRA_ERROR = "infra_error"
MAX_TURNS = "max_turns"
UNSCORED = (MODEL_ERROR, INFRA_ERROR)


class EvalError(ValueError):
    """A run that cannot start: a bad env id or wrapper, an endpoint that cannot be reached."""


class ModelCallError(Exception):
    """One chat completion failed; its episode is recorded as ``model_error``."""


@dataclass(frozen=True)
class EvalConfig:
    env_id: str
    model_url: str
    model_name: str | None = None
    api_key: str | None = None
    wrappers: str = ""
    episodes: int = 1
    samples: int = 1
    concurrency: int = 4
    seed: int = 0
    temperature: float = 1.0
    max_tokens: int | None = None
    max_turns: int = 32
    request_timeout: float = 600.0
    env_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeRecord:
    """One episode's transcript, as a line of ``--output``."""

    env_id: str
    task: int
    seed: int
    sample: int
    status: str
    passed: bool | None  # None: not scored
    reward: float  # the sum of the step rewards
    rewards: list[float]
    messages: list[dict[str, Any]]
    infos: list[dict[str, Any]]
    error: str | None = None

    @property
    def scored(self) -> bool:
        return self.status not in UNSCORED

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str, ensure_ascii=False)


def chat_completions_url(url: str) -> str:
    """``http://host:8000``, ``.../v1`` or ``.../v1/chat/completions`` -> the completions URL."""
    url = url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    return f"{url}/chat/completions" if url.endswith("/v1") else f"{url}/v1/chat/completions"


class ModelClient:
    """A client of one OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(self, session: aiohttp.ClientSession, config: EvalConfig) -> None:
        self.session = session
        self.url = chat_completions_url(config.model_url)
        self.config = config
        self.model_name = config.model_name
        self.headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}

    async def connect(self) -> None:
        """Check the endpoint answers (one clear error if not) and, with no model name given,
        take the first model its ``/models`` lists."""
        models_url = self.url.removesuffix("/chat/completions") + "/models"
        try:
            async with self.session.get(models_url, headers=self.headers) as response:
                body = await response.json(content_type=None) if response.status == 200 else None
                status = response.status
        except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
            raise EvalError(f"cannot reach the model endpoint at {self.url}: {exc or type(exc).__name__}") from exc
        if status in (401, 403):
            raise EvalError(f"{models_url} refused the request (HTTP {status}); check --api-key")
        if status >= 500:
            raise EvalError(f"{models_url} answered HTTP {status}; check the model server's log")
        if self.model_name is not None:
            return  # a server without /models (404) still serves completions
        try:
            self.model_name = str(body["data"][0]["id"])  # type: ignore[index]
        except (TypeError, KeyError, IndexError) as exc:
            raise EvalError(
                f"{models_url} answered {status} with no model listed; name the model with --model-name"
            ) from exc

    async def complete(self, messages: Sequence[dict[str, Any]]) -> str:
        payload: dict[str, Any] = {"model": self.model_name, "messages": list(messages), "temperature": self.config.temperature}
        if self.config.max_tokens is not None:
            payload["max_tokens"] = self.config.max_tokens
        try:
            async with self.session.post(self.url, json=payload, headers=self.headers) as response:
                text = await response.text()
                if response.status != 200:
                    raise ModelCallError(f"HTTP {response.status} from {self.url}: {text[:300]}")
            content = json.loads(text)["choices"][0]["message"]["content"]
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ModelCallError(f"{type(exc).__name__} calling {self.url}: {exc}") from exc
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ModelCallError(f"{self.url} answered no choices[0].message.content: {exc!r}") from exc
        if not isinstance(content, str):
            raise ModelCallError(f"{self.url} answered a message without text content")
        return content


def make_env(config: EvalConfig, runtime: Runtime) -> Env:
    """The env with its wrappers, on ``runtime``; a bad id, keyword or wrapper is an EvalError."""
    try:  # envs that score in a sandbox (code) score on ``runtime`` too
        return Scorer(config.env_id, runtime=runtime, wrappers=config.wrappers, **config.env_kwargs).make_env()
    except (KeyError, ValueError, TypeError) as exc:
        raise EvalError(exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)) from exc


async def play(config: EvalConfig, runtime: Runtime, model: ModelClient, task: int, sample: int) -> EpisodeRecord:
    """One episode of task ``task``; a failed model call ends it as ``model_error``."""
    seed = config.seed + task
    env = make_env(config, runtime)
    messages: list[dict[str, Any]] = []
    rewards: list[float] = []
    infos: list[dict[str, Any]] = []
    status, error, passed = MAX_TURNS, None, False
    try:
        obs, info = await env.areset(seed=seed)
        messages.append({"role": "user", "content": str(obs)})
        infos.append(dict(info))
        for _ in range(config.max_turns):
            try:
                reply = await model.complete(messages)
            except ModelCallError as exc:
                status, error = MODEL_ERROR, str(exc)
                break
            messages.append({"role": "assistant", "content": reply})
            obs, reward, terminated, truncated, info = await env.astep(reply)
            rewards.append(float(reward))
            infos.append(dict(info))
            if terminated or truncated:
                status = str(info.get("status") or ("done" if terminated else "truncated"))
                passed = float(reward) >= 1.0
                break
            messages.append({"role": "user", "content": str(obs)})
    finally:
        await env.aclose()
    return EpisodeRecord(
        env_id=config.env_id,
        task=task,
        seed=seed,
        sample=sample,
        status=status,
        passed=passed if status not in UNSCORED else None,
        reward=sum(rewards),
        rewards=rewards,
        messages=messages,
        infos=infos,
        error=error,
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of ``n`` samples of which ``c`` passed (needs ``n >= k``)."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class Summary:
    episodes: int
    scored: int
    mean_reward: float | None  # over scored episodes
    pass_at: dict[int, float]  # k -> pass@k over the tasks with >= k scored samples
    statuses: dict[str, int]

    def table(self) -> str:
        rows = [("episodes", str(self.episodes)), ("scored", str(self.scored))]
        rows.append(("mean reward", "-" if self.mean_reward is None else f"{self.mean_reward:.4f}"))
        rows += [(f"pass@{k}", f"{value:.4f}") for k, value in self.pass_at.items()]
        rows += [(f"status {name}", str(count)) for name, count in sorted(self.statuses.items())]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def summarize(records: Sequence[EpisodeRecord], samples: int) -> Summary:
    """Mean reward and pass@k (k = 1, 2, 4, ... up to ``samples``) of the scored episodes."""
    scored = [r for r in records if r.scored]
    by_task: dict[int, list[bool]] = {}
    for record in scored:
        by_task.setdefault(record.task, []).append(bool(record.passed))
    pass_at: dict[int, float] = {}
    for k in sorted({samples, *(2**i for i in range(samples.bit_length()) if 2**i <= samples)}):
        tasks = [outcomes for outcomes in by_task.values() if len(outcomes) >= k]
        if tasks:
            pass_at[k] = sum(pass_at_k(len(o), sum(o), k) for o in tasks) / len(tasks)
    return Summary(
        episodes=len(records),
        scored=len(scored),
        mean_reward=sum(r.reward for r in scored) / len(scored) if scored else None,
        pass_at=pass_at,
        statuses=dict(Counter(r.status for r in records)),
    )


async def evaluate(
    config: EvalConfig,
    *,
    runtime: Runtime,
    on_ready: Callable[[], None] | None = None,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play ``episodes x samples`` episodes, ``concurrency`` at once, on ``runtime``; the
    records come back in (task, sample) order. ``on_ready`` is called once the env and the
    endpoint are found good (before the first episode), ``on_episode`` with each as it ends."""
    if config.episodes < 1 or config.samples < 1 or config.concurrency < 1:
        raise EvalError("episodes, samples and concurrency must be at least 1")
    await make_env(config, runtime).aclose()  # a bad env id or wrapper fails here, before any model call
    limiter = anyio.CapacityLimiter(config.concurrency)
    records: dict[tuple[int, int], EpisodeRecord] = {}
    timeout = aiohttp.ClientTimeout(total=config.request_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        model = ModelClient(session, config)
        await model.connect()
        if on_ready is not None:
            on_ready()

        async def one(task: int, sample: int) -> None:
            async with limiter:
                record = await play(config, runtime, model, task, sample)
            records[task, sample] = record
            if on_episode is not None:
                on_episode(record)

        async with anyio.create_task_group() as tg:
            for task in range(config.episodes):
                for sample in range(config.samples):
                    tg.start_soon(one, task, sample)
    return [records[key] for key in sorted(records)]
