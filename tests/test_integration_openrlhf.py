"""The OpenRLHF adapter against OpenRLHF's own agent executor (openrlhf 0.11.2).

OpenRLHF itself does not install on this CPU-only machine (it pins deepspeed, flash-attn,
which build against CUDA, and its vLLM rollout needs a GPU), so the package is installed
without its dependencies and its released ``openrlhf/utils/agent.py`` is imported as it
ships, minus ``openrlhf/utils/__init__.py`` (which loads torch and transformers for helpers
the agent module does not use). The episodes run through that module's
``MultiTurnAgentExecutor.execute``, unmodified; what stands in for the GPU parts is a
scripted engine with vLLM's output shape and a character tokenizer with the call OpenRLHF
makes. The agent file is loaded the way OpenRLHF's rollout actor loads it.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import numpy as np
import pytest

from tests.trainer_policies import (
    GAME_ID,
    MATH_ID,
    MATH_SEED,
    Guesser,
    math_with_tool,
    sandboxes_of,
    wait_gone,
)


def _released_agent_module() -> types.ModuleType:
    try:
        from openrlhf.utils import agent  # a full install
    except ImportError:
        spec = importlib.util.find_spec("openrlhf")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("needs openrlhf: pip install --no-deps openrlhf==0.11.2", allow_module_level=True)
        utils = types.ModuleType("openrlhf.utils")
        utils.__path__ = [str(Path(spec.submodule_search_locations[0]) / "utils")]
        sys.modules["openrlhf.utils"] = utils
        from openrlhf.utils import agent
    return agent


AGENT = _released_agent_module()

import gem_sandbox  # noqa: E402
from gem_sandbox.integrations.openrlhf import agent_executor, seed_from_label  # noqa: E402
from gem_sandbox.integrations.scoring import Scorer  # noqa: E402

EXAMPLE = Path(__file__).parent.parent / "examples" / "openrlhf_agent_func.py"


class CharTokenizer:
    """One token per character, called as OpenRLHF's executor calls a Hugging Face tokenizer."""

    def __call__(self, text: str, add_special_tokens: bool = False, return_tensors: str = "pt") -> dict[str, Any]:
        return {"input_ids": np.array([[ord(c) for c in text]])}

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(map(chr, ids))


class ScriptedEngine:
    """vLLM's ``generate`` shape; ``policy`` answers the whole conversation so far."""

    def __init__(self, policy: Callable[[str], str]) -> None:
        self.policy = policy
        self.calls = 0

    async def generate(self, token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        self.calls += 1
        text = self.policy("".join(map(chr, token_ids)))
        out = SimpleNamespace(text=text, token_ids=[ord(c) for c in text], finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


def _load_agent_file(path: Path) -> Any:
    """What OpenRLHF's rollout actor does with ``--train.agent_func_path``."""
    spec = importlib.util.spec_from_file_location("agent_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AGENT.AgentExecutorBase)
    return module.AgentExecutor()


def _execute(executor: Any, prompt: str, label: Any, policy: Callable[[str], str], max_length: int = 20000) -> dict:
    engine = ScriptedEngine(policy)
    result = anyio.run(
        lambda: executor.execute(
            prompt=prompt,
            label=label,
            sampling_params=SimpleNamespace(max_tokens=512, logprobs=None),
            max_length=max_length,
            hf_tokenizer=CharTokenizer(),
            llm_engine=engine,
        )
    )
    result["engine_calls"] = engine.calls
    return result


def test_the_example_agent_file_loads_as_openrlhf_loads_it(monkeypatch):
    monkeypatch.setenv("GEM_ENV_ID", GAME_ID)
    executor = _load_agent_file(EXAMPLE)
    assert isinstance(executor, AGENT.MultiTurnAgentExecutor)


def test_a_game_is_won_through_openrlhfs_multi_turn_executor():
    [row] = Scorer(GAME_ID).rows(1, seed=11)
    result = _execute(agent_executor(GAME_ID)(), row["prompt"], str(row["seed"]), Guesser())
    assert result["reward"] == 1.0
    assert len(result["action_ranges"]) == result["engine_calls"] >= 1
    text = "".join(map(chr, result["observation_tokens"]))
    assert text.startswith(row["prompt"])
    assert result["extra_logs"]["turns"] == result["engine_calls"]


def test_the_label_seed_picks_the_episode():
    executor = agent_executor(GAME_ID)()
    first, second = Guesser(), Guesser()
    assert _execute(executor, "", "5", first)["reward"] == _execute(executor, "", "5", second)["reward"] == 1.0
    assert first.last == second.last  # the same seed, the same target found
    assert seed_from_label("5") == 5 and seed_from_label(7) == 7
    assert seed_from_label("a cat") is None and seed_from_label(None) is None and seed_from_label(True) is None


def test_an_empty_prompt_starts_from_the_envs_own_observation():
    result = _execute(agent_executor(GAME_ID)(), "", "2", Guesser())
    assert "".join(map(chr, result["observation_tokens"])).startswith("You are playing Guess The Number")


def test_a_python_tool_episode_scores_the_number_its_sandbox_printed():
    with gem_sandbox.SyncRuntime("local", max_size=2) as runtime:
        executor = agent_executor(MATH_ID, wrappers="python_tool", runtime=runtime)()
        [row] = Scorer(MATH_ID, wrappers="python_tool", runtime=runtime).rows(1, seed=MATH_SEED)
        result = _execute(executor, row["prompt"], MATH_SEED, math_with_tool)
        leases = runtime.statistics().leases
        leased = runtime.statistics().leased
    assert result["engine_calls"] == 2
    assert result["extra_logs"]["correct"] == 1.0
    assert result["extra_logs"]["tool_success_counter"] == 1.0
    assert result["reward"] > 1.0  # the answer's 1 and the tool's shaping reward
    assert leases == 1 and leased == 0  # one sandbox lease: the tool call


def test_a_text_with_no_move_ends_the_game_with_its_format_penalty():
    result = _execute(agent_executor(GAME_ID)(), "", "1", lambda text: "no guess here")
    assert result["engine_calls"] == 1 and result["reward"] < 0


def test_an_action_that_is_not_text_is_refused_and_the_env_closed():
    instance = agent_executor(GAME_ID)().agent_instance_cls()

    async def play() -> None:
        await instance.reset({"observation": "", "label": 1})
        await instance.step({"action_text": None, "observation_text": "", "label": 1})

    closed: list[bool] = []
    close = instance.env.close
    instance.env.close = lambda: closed.append(True) or close()
    with pytest.raises(TypeError, match="action_text"):
        anyio.run(play)
    assert closed == [True]


@pytest.mark.parametrize(
    "env_id, wrappers, error",
    [("game:NoSuchGame-v0", "", ValueError), (GAME_ID, "python_tol", KeyError)],
)
def test_an_unknown_env_or_wrapper_fails_when_the_agent_file_loads(env_id: str, wrappers: str, error: type[Exception]):
    with pytest.raises(error, match=env_id if error is ValueError else wrappers):
        agent_executor(env_id, wrappers=wrappers)


KILLED_MID_STEP = """
import sys, types, importlib.util, pathlib
spec = importlib.util.find_spec("openrlhf")
utils = types.ModuleType("openrlhf.utils")
utils.__path__ = [str(pathlib.Path(spec.submodule_search_locations[0]) / "utils")]
sys.modules.setdefault("openrlhf.utils", utils)
import anyio, gem_sandbox
from gem_sandbox.integrations.openrlhf import agent_instance

async def main():
    with gem_sandbox.SyncRuntime("local", max_size=1, min_idle=1) as runtime:
        agent = agent_instance("math:Arithmetic-v0", wrappers="python_tool", runtime=runtime)()
        await agent.reset({"observation": "", "label": 3})
        print("stepping", flush=True)
        await agent.step({"action_text": "<python>import time; time.sleep(120)</python>"})

anyio.run(main)
"""


def test_a_trainer_killed_mid_step_leaves_no_sandbox_running():
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_MID_STEP)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "stepping", proc.communicate(timeout=60)[1]
        boxes: set[str] = set()
        for _ in range(300):
            if boxes := sandboxes_of(proc.pid):
                break
            anyio.run(anyio.sleep, 0.1)
        assert boxes, "the episode's step started no sandbox"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not wait_gone(boxes), "a sandbox outlived the killed trainer"
