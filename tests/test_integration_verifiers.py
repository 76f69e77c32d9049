"""The verifiers adapter through verifiers' own loader and eval path (verifiers 0.3.1).

verifiers 0.3.1 is the newest release with the classic ``Environment``/``MultiTurnEnv``/
``Rubric`` stack (as ``verifiers.legacy``, also ``import verifiers as vf``); 0.4.0 replaced it
with its v1 taskset/harness stack. Each test loads the env with ``vf.load_environment`` and
runs ``evaluate`` against a real OpenAI-compatible server on loopback: an aiohttp app that
answers chat completions with a scripted policy reading the conversation verifiers sends.
"""

from __future__ import annotations

import asyncio
import itertools
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

vf = pytest.importorskip("verifiers", reason="needs verifiers: pip install 'gem-sandbox[verifiers]'")

from aiohttp import web  # noqa: E402

import gem_sandbox  # noqa: E402
from gem_sandbox.integrations.verifiers import GemMultiTurnEnv, GemSingleTurnEnv  # noqa: E402
from tests.trainer_policies import GAME_ID, MATH_ID, MATH_SEED, Guesser, math_with_tool  # noqa: E402

MODULE = "gem_sandbox.integrations.verifiers"
KEY_VAR = "SCRIPTED_SERVER_KEY"

Policy = Callable[[list[dict[str, Any]]], str]


def guesser_policy(messages: list[dict[str, Any]]) -> str:
    """A fresh binary search replayed over the conversation's user turns."""
    guesser = Guesser()
    reply = ""
    for message in messages:
        if message["role"] == "user":
            reply = guesser(message["content"])
    return reply


def math_policy(messages: list[dict[str, Any]]) -> str:
    return math_with_tool(messages[-1]["content"])


async def _serve(policy: Policy) -> tuple[web.AppRunner, str, list[dict]]:
    requests: list[dict] = []
    ids = itertools.count()

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        requests.append(body)
        text = policy(body["messages"])
        return web.json_response(
            {
                "id": f"chatcmpl-{next(ids)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/v1", requests


def _evaluate(env: Any, policy: Policy, num_examples: int) -> tuple[dict, list[dict]]:
    async def run() -> tuple[dict, list[dict]]:
        runner, url, requests = await _serve(policy)
        try:
            client = vf.ClientConfig(api_base_url=url, api_key_var=KEY_VAR, max_retries=0)
            results = await env.evaluate(client, "scripted", num_examples=num_examples, on_progress=lambda *a, **k: None)
        finally:
            await runner.cleanup()
        return results, requests

    return asyncio.run(run())


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, "scripted")
    monkeypatch.setenv("OPENAI_API_KEY", "scripted")


def test_load_environment_finds_this_module_by_its_id():
    env = vf.load_environment(MODULE, gem_env_id=GAME_ID, num_examples=2)
    assert isinstance(env, GemMultiTurnEnv) and isinstance(env, vf.MultiTurnEnv)
    assert [row["info"]["seed"] for row in env.dataset] == [0, 1]


def test_games_are_won_through_verifiers_multi_turn_rollouts():
    env = vf.load_environment(MODULE, gem_env_id=GAME_ID, num_examples=2, seed=30)
    results, requests = _evaluate(env, guesser_policy, num_examples=2)
    outputs = results["outputs"]
    assert [o["reward"] for o in outputs] == [1.0, 1.0]
    assert len(requests) >= 2 and all(r["model"] == "scripted" for r in requests)
    assert not env._envs  # every rollout's env was closed


def test_a_python_tool_episode_scores_the_number_its_sandbox_printed():
    with gem_sandbox.SyncRuntime("local", max_size=2) as runtime:
        env = vf.load_environment(MODULE, gem_env_id=MATH_ID, wrappers="python_tool", num_examples=1, seed=MATH_SEED, runtime=runtime)
        results, requests = _evaluate(env, math_policy, num_examples=1)
        stats = runtime.statistics()
    [output] = results["outputs"]
    assert len(requests) == 2
    assert requests[1]["messages"][-1]["content"].startswith("Code execution result: ")
    assert output["reward"] > 1.0  # the answer's 1 and the tool's shaping reward
    assert stats.leases == 1 and stats.leased == 0


def test_a_single_turn_env_is_scored_by_the_shared_scorer():
    with gem_sandbox.SyncRuntime("local", max_size=1) as runtime:
        env = vf.load_environment(MODULE, gem_env_id="math:Arithmetic-v0", num_examples=1, seed=MATH_SEED, runtime=runtime)
        assert isinstance(env, GemSingleTurnEnv)
        answer = pow(77, 9016, 2143)
        results, _ = _evaluate(env, lambda messages: f"\\boxed{{{answer}}}", num_examples=1)
    [output] = results["outputs"]
    assert output["reward"] == 1.0


def test_an_unknown_env_id_fails_when_the_environment_loads():
    with pytest.raises(RuntimeError, match="NoSuchGame") as failed:  # verifiers' loader wraps the error
        vf.load_environment(MODULE, gem_env_id="game:NoSuchGame-v0")
    assert isinstance(failed.value.__cause__, ValueError)


def test_an_unknown_wrapper_fails_when_the_environment_loads():
    with pytest.raises(RuntimeError, match="python_tol") as failed:
        vf.load_environment(MODULE, gem_env_id=GAME_ID, wrappers="python_tol")
    assert isinstance(failed.value.__cause__, KeyError)


def test_a_reply_without_a_move_gets_the_envs_format_penalty():
    env = vf.load_environment(MODULE, gem_env_id=GAME_ID, num_examples=1)
    results, _ = _evaluate(env, lambda messages: "no guess here", num_examples=1)
    [output] = results["outputs"]
    assert output["reward"] < 0


def test_a_rollout_verifiers_aborts_still_closes_its_env():
    env = vf.load_environment(MODULE, gem_env_id=GAME_ID, num_examples=1)
    results, _ = _evaluate(env, lambda messages: "", num_examples=1)  # verifiers refuses an empty reply
    [output] = results["outputs"]
    assert output["reward"] == 0.0 and output.get("error")
    assert not env._envs


def test_the_example_runs():
    example = runpy.run_path(str(Path(__file__).parent.parent / "examples" / "verifiers_eval.py"))

    async def run() -> list[float]:
        runner, url, _ = await _serve(guesser_policy)
        try:
            return await example["main"](url, "scripted")
        finally:
            await runner.cleanup()

    assert asyncio.run(run()) == [1.0, 1.0]
