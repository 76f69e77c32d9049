"""GEM's own calls, made through ``import gem_sandbox as gem``: the wrapper factory called as
GEM's tests call it, the env attributes GEM's code reads (``CodeEnv.tests``, a reasoning-gym
env's ``seed``), every constructor argument GEM's envs take, and ``gem.utils.sandbox``.

Each behaviour is the one GEM's public tests and examples rely on (``tests/test_env``,
``tests/test_tool``, ``examples/train_tinker``); written here from what they call, not copied.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time

import pytest
from gem_sandbox_envs.code.stdio import CodeEnv
from gem_sandbox_envs.games.fifteen_puzzle import FifteenPuzzleEnv, is_solvable
from gem_sandbox_envs.games.guess_the_number import GuessTheNumberEnv
from gem_sandbox_envs.qa.qa_env import QaEnv

import gem_sandbox as gem
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools.tool_env_wrapper import ToolEnvWrapper
from gem_sandbox.utils.sandbox import run_python
from gem_sandbox.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem_sandbox.wrappers.observation_wrapper import ObservationWrapper
from gem_sandbox.wrappers.wrapper_factory import WRAPPER_FACTORY, get_wrapper_fns

QA_ROWS = [{"question": "Capital of France?", "answer": ["Paris"]}, {"question": "2+2?", "answer": ["4"]}]


class ChatMLTokenizer:
    """The one method of a Hugging Face tokenizer that GEM's chat wrappers call, rendering
    ChatML as Qwen's template does."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


@pytest.fixture(scope="module")
def sync_runtime():
    with SyncRuntime("local", max_size=2) as runtime:
        yield runtime


# -- the wrapper factory, called as GEM's tests call it --------------------------------


@pytest.mark.parametrize("name", sorted(set(WRAPPER_FACTORY) - {"concat_chat", "concat_chat_on_reset"}))
def test_a_factory_entry_called_with_an_env_returns_the_wrapped_env(name: str):
    env = GuessTheNumberEnv()
    wrapped = WRAPPER_FACTORY[name](env)
    assert isinstance(wrapped, gem.EnvWrapper)
    assert wrapped.env is env


@pytest.mark.parametrize("name", ["concat_chat", "concat_chat_on_reset"])
def test_a_chat_entry_takes_the_tokenizer_beside_the_env(name: str):
    wrapped = WRAPPER_FACTORY[name](GuessTheNumberEnv(seed=1), tokenizer=ChatMLTokenizer())
    obs, _ = wrapped.reset()
    assert obs.startswith("<|im_start|>user\nYou are playing Guess The Number")
    assert "<|im_end|>\n<|im_start|>assistant\n" in obs


def test_tool_entries_build_gems_tool_wrapper_and_take_its_arguments():
    default = WRAPPER_FACTORY["python_tool"](GuessTheNumberEnv())
    assert isinstance(default, ToolEnvWrapper)
    assert (default.tool_reward, default.tool_success_reward, default.max_tool_uses) == (0.05, 0.25, 5)
    overridden = WRAPPER_FACTORY["python_tool"](GuessTheNumberEnv(), max_tool_uses=2, tool_reward=0.0)
    assert (overridden.tool_reward, overridden.max_tool_uses) == (0.0, 2)


def test_each_wrapped_env_gets_a_tool_of_its_own():
    first, second = (WRAPPER_FACTORY["calculator_tool"](GuessTheNumberEnv()) for _ in range(2))
    assert first.tools[0] is not second.tools[0]


def test_get_wrapper_fns_composes_in_order_as_gems_examples_do():
    env = GuessTheNumberEnv(seed=3)
    for wrap in get_wrapper_fns("calculator_tool,concat_chat,episode_tracking", tokenizer=ChatMLTokenizer()):
        env = wrap(env)
    assert isinstance(env, EpisodeTrackingWrapper)
    assert isinstance(env.env, ObservationWrapper)
    assert isinstance(env.env.env, ToolEnvWrapper)


def test_an_empty_wrapper_list_wraps_nothing():
    assert get_wrapper_fns("", tokenizer=None) == []


def test_the_wrappers_package_loads_no_tool_or_sandbox_code_until_a_tool_wrapper_is_built():
    probe = (
        "import sys, gem_sandbox.wrappers as w\n"
        "from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns\n"
        "print(sorted(m for m in sys.modules if m.startswith('gem_sandbox.tools')))\n"
        "w.ToolEnvWrapper\n"
        "print('gem_sandbox.tools.tool_env_wrapper' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "True"]


# -- the attributes GEM's code reads -----------------------------------------------------


def test_code_env_exposes_the_tasks_tests_as_gems_does():
    tests = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    env = CodeEnv(dataset=[{"problem": "add", "tests": tests}], max_tests=3)
    assert env.tests is None
    env.reset()
    assert env.tests == tests


def test_code_env_decodes_tests_stored_as_json_text():
    tests = [{"input": "1 2\n", "output": "3\n"}]
    env = CodeEnv(dataset=[{"problem": "add", "tests": json.dumps(tests)}])
    env.reset()
    assert env.tests == tests


def test_code_env_scores_the_solution_gems_test_passes(sync_runtime: SyncRuntime):
    tests = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
    env = CodeEnv(dataset=[{"problem": "add", "tests": tests}], max_tests=3, runtime=sync_runtime)
    env.reset()
    _, reward, *_ = env.step("```python\na, b = map(int, input().split())\nprint(a + b)\n```")
    assert reward == 1


def test_a_reasoning_gym_env_has_the_seed_it_was_made_with():
    assert gem.make("rg:leg_counting", seed=10, size=100).seed == 10


def test_a_group_made_with_different_seeds_has_different_seeds_and_problems():
    group = [gem.make("rg:leg_counting", seed=time.time_ns() + i, size=10**6) for i in range(4)]
    assert len({env.seed for env in group}) == 4
    assert len({env.reset()[0] for env in group}) > 1


def test_a_copy_keeps_the_seed_and_a_spawn_takes_its_new_one():
    env = gem.make("rg:leg_counting", seed=7, size=100)
    assert copy.deepcopy(env).seed == 7
    assert env.spawn(seed=8).seed == 8


# -- every argument GEM's envs take -------------------------------------------------------


def test_qa_env_accepts_gems_verbose_max_turns_and_cache_arguments():
    env = QaEnv(dataset=QA_ROWS, verbose=True, max_turns=3, load_from_cache_file=False)
    obs, _ = env.reset(seed=0)
    assert "?" in obs


def test_qa_env_refuses_a_name_no_gem_env_knows():
    with pytest.raises(TypeError, match=r"unknown option 'verbos' \(did you mean 'verbose'\?\)"):
        QaEnv(dataset=QA_ROWS, verbos=True)


def test_positional_arguments_land_where_gems_envs_put_them():
    qa = QaEnv("", None, QA_ROWS, "question", "answer", 0, True, False)
    assert qa.extract_boxed is True
    code = CodeEnv("", None, [{"problem": "p", "tests": {"inputs": [], "outputs": []}}], "problem", "tests", 0, 5, 3, False, "none")
    assert code.max_tests == 3


def test_math_env_takes_gems_dataset_and_use_mp():
    pytest.importorskip("math_verify")
    env = gem.make("math:Math12K", dataset=[{"problem": "1+1?", "answer": "2"}], use_mp=False)
    assert env.reset()[0] == "1+1?"
    assert env.step(r"\boxed{2}")[1] == 1.0


def test_a_trainers_shared_keywords_reach_every_env_kind():
    # GEM's Tinker example passes seed, dataset (the first env's) and use_mp to whatever id it trains.
    for env_id in ("rg:leg_counting", "game:GuessTheNumber-v0", "qa:NaturalQuestions"):
        first = gem.make(env_id, seed=time.time_ns(), use_mp=False, **({"sample": True} if "qa" in env_id else {}))
        dataset = getattr(first, "dataset", None)
        kwargs = {"sample": True} if "qa" in env_id else {}
        second = gem.make(env_id, seed=time.time_ns(), dataset=dataset, use_mp=False, **kwargs)
        assert isinstance(second.reset()[0], str)


def test_games_accept_gems_keywords_and_refuse_the_rest():
    env = GuessTheNumberEnv(max_turns=4, verbose=True, dataset=None)
    assert env.max_turns == 4
    with pytest.raises(TypeError, match=r"unknown option 'max_turn' \(did you mean 'max_turns'\?\)"):
        GuessTheNumberEnv(max_turn=4)


def test_fifteen_puzzle_takes_gems_monte_carlo_boards():
    env = FifteenPuzzleEnv(max_turns=100, num_rows=4, init_algo="monte_carlo", mc_rand_moves=20, seed=5)
    env.reset()
    assert is_solvable(env.tiles, 4) and env.tiles != env._goal()


def test_a_one_slide_monte_carlo_board_is_one_move_from_solved():
    env = FifteenPuzzleEnv(num_rows=3, init_algo="monte_carlo", mc_rand_moves=1, seed=2)
    env.reset()
    assert sum(tile != goal for tile, goal in zip(env.tiles, env._goal())) == 2  # the blank and one tile


def test_fifteen_puzzle_refuses_an_unknown_init_algo():
    with pytest.raises(ValueError, match="init_algo is one of pure_random, monte_carlo"):
        FifteenPuzzleEnv(init_algo="greedy")


# -- gem.utils.sandbox ----------------------------------------------------------------------


def test_run_python_answers_gems_triple(sync_runtime: SyncRuntime):
    assert run_python("print(input() * 2)", "none", stdin="ab", runtime=sync_runtime) == (True, "abab\n", "")


def test_run_python_reruns_with_gems_standard_imports(sync_runtime: SyncRuntime):
    assert run_python("print(sqrt(16))", runtime=sync_runtime) == (True, "4.0\n", "")


def test_run_python_applies_the_timeout(sync_runtime: SyncRuntime):
    assert run_python("import time; time.sleep(30)", timeout=1, runtime=sync_runtime) == (
        False,
        "",
        "\nExecution timed out after 1 seconds.",
    )


def test_run_python_blocks_nothing_gems_blacklist_blocks(sync_runtime: SyncRuntime):
    ok, stdout, _ = run_python("import subprocess; print(subprocess.run(['echo', 'hi'], capture_output=True).stdout.decode())", "bwrap", runtime=sync_runtime)
    assert (ok, stdout) == (True, "hi\n\n")


def test_run_python_refuses_a_sandbox_type_gem_does_not_have():
    with pytest.raises(ValueError, match="sandbox_type is one of none, bwrap"):
        run_python("print(1)", "docker")
