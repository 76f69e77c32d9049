"""The SkyRL adapter through SkyRL-gym's own registry and ``make`` (skyrl-gym 0.4.0).

Episodes run as SkyRL-train's generator runs them: ``skyrl_gym.make(env_class,
env_config=..., extras=<row columns and max_turns>)``, ``init(prompt messages)``, ``step(text)``
until ``done`` (the observations appended to the chat), then ``close()``.
"""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="needs skyrl-gym: pip install 'gem-sandbox[skyrl]'")

from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

import gem_sandbox  # noqa: E402
from gem_sandbox.integrations.scoring import Scorer  # noqa: E402
from gem_sandbox.integrations.skyrl import GemTextEnv, register  # noqa: E402
from gem_sandbox.registry import UnknownEnvError  # noqa: E402
from tests.trainer_policies import GAME_ID, MATH_ID, MATH_SEED, Guesser, math_with_tool  # noqa: E402


def _play(env: BaseTextEnv, prompt: list[dict[str, str]], policy: Callable[[str], str]) -> tuple[float, list[dict]]:
    """SkyRL-train's loop: the chat grows by each action and the env's observations."""
    chat, _ = env.init(prompt)
    total, done = 0.0, False
    while not done:
        action = policy(chat[-1]["content"])
        out = env.step(action)
        chat = [*chat, {"role": "assistant", "content": action}, *out["observations"]]
        total += out["reward"]
        done = out["done"]
    return total, chat


def test_make_builds_a_registered_catalogue_env_as_a_base_text_env():
    assert register([GAME_ID]) == [GAME_ID]
    env = skyrl_gym.make(GAME_ID, env_config={}, extras={"seed": 1, "max_turns": 20})
    try:
        assert isinstance(env, GemTextEnv) and isinstance(env, BaseTextEnv) and isinstance(env, skyrl_gym.Env)
        assert env.spec.id == GAME_ID and env.max_turns == 20
    finally:
        env.close()


def test_a_game_row_is_played_to_a_win_from_its_prompt():
    register([GAME_ID])
    [row] = Scorer(GAME_ID).rows(1, seed=11)
    env = skyrl_gym.make(GAME_ID, env_config={}, extras={"seed": row["seed"], "max_turns": 20})
    prompt = [{"role": "user", "content": row["prompt"]}]
    try:
        total, chat = _play(env, prompt, Guesser())
    finally:
        env.close()
    assert total == 1.0
    assert chat[0] == prompt[0] and chat[-1]["role"] == "assistant"  # no observation after the last step
    assert env.get_metrics()["turns"] == env.turns == len(chat) // 2  # the prompt, then two messages a turn but the last


def test_a_row_without_a_prompt_starts_from_the_envs_observation():
    register([GAME_ID])
    env = skyrl_gym.make(GAME_ID, env_config={}, extras={"extra_info": {"seed": "4"}})
    try:
        chat, meta = env.init([])
    finally:
        env.close()
    assert chat[0]["role"] == "user" and chat[0]["content"].startswith("You are playing Guess The Number")
    assert meta["seed"] == 4


def test_a_python_tool_episode_runs_its_call_in_a_sandbox_and_close_releases_it():
    with gem_sandbox.SyncRuntime("local", max_size=2) as runtime:
        register([MATH_ID], wrappers="python_tool", runtime=runtime)
        env = skyrl_gym.make(MATH_ID, env_config={}, extras={"seed": MATH_SEED, "max_turns": 4})
        steps: list[dict[str, Any]] = []
        original = env.step
        env.step = lambda action: steps.append(original(action)) or steps[-1]  # record what SkyRL reads
        total, chat = _play(env, [], math_with_tool)
        env.close()
        stats = runtime.statistics()
    assert stats.leases == 1 and stats.leased == 0  # one sandbox lease: the tool call
    assert steps[0]["metadata"]["tool_status"] == "ok"
    assert steps[0]["postprocessed_action"].endswith("</python>")
    assert chat[2]["content"].startswith("Code execution result: ")
    assert steps[1]["done"] and steps[1]["metadata"]["correct"] is True
    assert total > 1.0  # the answer's 1 and the tool's shaping reward


def test_env_config_chooses_the_wrappers():
    with gem_sandbox.SyncRuntime("local", max_size=1) as runtime:
        register([MATH_ID], runtime=runtime)
        env = skyrl_gym.make(MATH_ID, env_config={"wrappers": "python_tool"}, extras={"seed": MATH_SEED})
        try:
            env.init([])
            out = env.step("<python>print(1)</python>")
        finally:
            env.close()
    assert out["observations"][0]["content"].startswith("Code execution result: 1")


def test_close_twice_is_harmless():
    register([GAME_ID])
    env = skyrl_gym.make(GAME_ID, extras={"seed": 1})
    env.close()
    env.close()


def test_register_without_ids_registers_the_whole_catalogue():
    ids = register()
    assert set(ids) == set(gem_sandbox.registry.registered_envs())
    assert set(ids) <= set(skyrl_gym.registry)


def test_an_unknown_env_id_is_refused_before_anything_is_registered():
    before = set(skyrl_gym.registry)
    with pytest.raises(UnknownEnvError, match="GuessTheNumbr"):
        register(["game:Wordle-v0", "game:GuessTheNumbr-v0"])
    assert set(skyrl_gym.registry) == before


def test_an_unknown_wrapper_is_refused():
    with pytest.raises(KeyError, match="python_tol"):  # GEM's wrapper factory raises KeyError
        register([GAME_ID], wrappers="python_tol")


def test_an_action_that_is_not_text_is_refused():
    register([GAME_ID])
    env = skyrl_gym.make(GAME_ID, extras={"seed": 1})
    try:
        env.init([])
        with pytest.raises(TypeError, match="model's text"):
            env.step({"content": "\\boxed{3}"})
    finally:
        env.close()


def test_a_seed_that_is_not_an_int_is_refused():
    register([GAME_ID])
    with pytest.raises(ValueError, match="seed"):
        skyrl_gym.make(GAME_ID, extras={"seed": "three"})


def test_the_example_runs():
    example = runpy.run_path(str(Path(__file__).parent.parent / "examples" / "skyrl_guess_the_number.py"))
    assert example["main"](seed=2) == 1.0
