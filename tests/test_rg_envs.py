"""reasoning-gym's datasets under GEM's ``rg:`` ids: every id builds, scores its own answer
through GEM's boxed format, draws its problems from ``self.rng`` and shares its dataset.

Each dataset is built once, at the registered size, and each entry generated once: the env's
caches are shared by every test here, which keeps the ~100 datasets to one build each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

reasoning_gym = pytest.importorskip("reasoning_gym")

from gem.utils.parsing import extract_last_boxed_answer as gem_extract  # noqa: E402
from gem_sandbox_envs import rg  # noqa: E402
from gem_sandbox_envs.rg.env import TERMINAL_STATE, ReasoningGymEnv, shared_dataset  # noqa: E402
from gem_sandbox_envs.rg.names import DATASET_NAMES  # noqa: E402

import gem_sandbox as gem  # noqa: E402
from gem_sandbox.core import ResetNeeded  # noqa: E402
from gem_sandbox.registry import ENV_REGISTRY  # noqa: E402
from gem_sandbox.runtime import Runtime  # noqa: E402
from gem_sandbox.sandbox.pool import PoolConfig  # noqa: E402
from gem_sandbox.utils.parsing import last_boxed_answer  # noqa: E402
from gem_sandbox.wrappers import get_wrapper_fns  # noqa: E402
from tests.tool_fixtures import SPEC, make_backend  # noqa: E402

rg.register_all()

#: Cannot be built from GEM's kwargs at all (GEM's own rg:composite fails the same way).
UNBUILDABLE = {"composite": "mixes other datasets and needs their list (datasets=...), which the id lacks"}

#: No oracle answer (``entry["answer"]`` is None: many answers are valid, the verifier checks
#: one); the entry's metadata carries an example that the verifier accepts.
REFERENCE_ANSWERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "graph_color": lambda entry: json.dumps(entry["metadata"]["possible_answer"]),
    "propositional_logic": lambda entry: entry["metadata"]["example_answer"],
    "rubiks_cube": lambda entry: entry["metadata"]["example_correct_answer"],
}

#: No oracle answer and no example: scoring a right answer would take a solver of our own.
NO_REFERENCE = {
    "boxnet": "answer is None and the metadata holds no plan (the verifier simulates the agents' moves)",
    "rush_hour": "answer is None and the metadata holds no solution (the verifier simulates the moves)",
}

#: A verifier that gives full marks to a wrong answer (reasoning-gym 0.1.23, and so GEM too).
WRONG_SCORES_FULL = {
    "game_of_life_halting": "compares bool(answer) with bool(entry['answer']), both strings: "
    "every non-empty answer scores 1.0",
}

#: Verifiers that raise on an answer they cannot parse; the env scores it 0 as verifier_error.
RAISES_ON_WRONG = {"prime_factorization"}

WRONG = "\\boxed{no idea}"
BUILDABLE = [name for name in DATASET_NAMES if name not in UNBUILDABLE]


def test_the_names_are_reasoning_gyms_and_every_one_is_registered_with_gems_kwargs():
    assert list(DATASET_NAMES) == sorted(reasoning_gym.factory.DATASETS)
    for name in DATASET_NAMES:
        spec = ENV_REGISTRY[f"rg:{name}"]
        assert spec.kwargs == {"name": name, "size": 500, "seed": 42}
        assert spec.source() == f"procedural: reasoning-gym {name} (size 500, seed 42)"


def test_registering_and_listing_import_no_reasoning_gym():
    code = (
        "import sys; from gem_sandbox_envs import rg; rg.register_all();"
        "from gem_sandbox.registry import ENV_REGISTRY;"
        "[s.source() for i, s in ENV_REGISTRY.items() if i.startswith('rg:')];"
        "assert 'reasoning_gym' not in sys.modules, 'imported reasoning_gym'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", BUILDABLE)
def test_every_id_scores_its_own_answer_full_and_a_wrong_one_less(name: str):
    env = gem.make(f"rg:{name}")
    question, info = env.reset(seed=0)
    entry = env.entry
    assert question == entry["question"] and info == {}

    if name in NO_REFERENCE:
        assert entry["answer"] is None
    else:
        answer = REFERENCE_ANSWERS[name](entry) if name in REFERENCE_ANSWERS else entry["answer"]
        action = f"Reasoning... so the answer is \\boxed{{{answer}}}"
        assert gem_extract(action) == answer  # GEM's extraction reads it the same
        full_marks = {"status": "ok", "score": 1.0, "correct": True}
        assert env.step(action) == (TERMINAL_STATE, 1.0, True, True, full_marks)

    env.reset(seed=0)
    _, reward, *_, info = env.step(WRONG)
    assert reward == info["score"]
    assert info["status"] == ("verifier_error" if name in RAISES_ON_WRONG else "ok")
    assert ("error" in info) == (name in RAISES_ON_WRONG)
    if name in WRONG_SCORES_FULL:
        assert reward == 1.0 and info["correct"]
    else:
        assert reward < 1.0 and not info["correct"]

    env.reset(seed=0)
    _, reward, *_, info = env.step("no box, no answer")
    assert info["status"] == "format_error" and not info["correct"]
    assert reward == info["score"] == env.dataset.score_answer(None, entry)  # GEM scores None too


def json_with_escaped_braces(value: Any) -> str:
    """``value`` as JSON whose strings spell their braces as ``\\u007b``/``\\u007d``."""
    if isinstance(value, dict):
        items = (f"{json_with_escaped_braces(k)}: {json_with_escaped_braces(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(json_with_escaped_braces, value)) + "]"
    return json.dumps(value).replace("{", "\\u007b").replace("}", "\\u007d")


def test_codeio_answers_with_a_lone_brace_cannot_be_boxed_verbatim_but_escaped():
    """5 of codeio's 500 answers at seed 42 (entries 93, 289, 379, 457, 475) hold an unmatched
    brace inside a JSON string, so no \\boxed{} closes around them, in GEM's extraction or ours.
    The same JSON with that brace escaped is read whole and scores 1.0."""
    dataset = shared_dataset("codeio", 500, 42)
    entry = dataset[93]
    answer = entry["answer"]
    verbatim = f"\\boxed{{{answer}}}"
    assert gem_extract(verbatim) != answer and last_boxed_answer(verbatim) != answer
    escaped = json_with_escaped_braces(json.loads(answer))
    assert dataset.score_answer(last_boxed_answer(f"\\boxed{{{escaped}}}"), entry) == 1.0


@pytest.mark.parametrize("name", sorted(UNBUILDABLE))
def test_an_unbuildable_dataset_fails_at_its_first_reset_not_at_make(name: str):
    env = gem.make(f"rg:{name}")
    with pytest.raises(AssertionError, match="at least one dataset"):
        env.reset(seed=0)


def test_a_seed_repeats_the_problem_and_the_next_ones():
    first, second = gem.make("rg:leg_counting"), gem.make("rg:leg_counting", seed=7)
    runs = []
    for env in (first, second):
        runs.append([env.reset(seed=3)[0], env.reset()[0], env.reset()[0]])
    assert runs[0] == runs[1]
    assert len({gem.make("rg:leg_counting").reset(seed=s)[0] for s in range(10)}) >= 9


def test_seed_seeds_the_draws_and_dataset_seed_the_pool():
    a, b = gem.make("rg:leg_counting", seed=1), gem.make("rg:leg_counting", seed=2)
    assert [a.reset()[0] for _ in range(5)] != [b.reset()[0] for _ in range(5)]
    other_pool = gem.make("rg:leg_counting", dataset_seed=43)
    assert other_pool.reset(seed=0)[0] != a.reset(seed=0)[0]


def test_the_problem_is_the_public_apis_entry():
    env = gem.make("rg:leg_counting")
    question, _ = env.reset(seed=0)
    fresh = reasoning_gym.create_dataset("leg_counting", size=500, seed=42)
    assert fresh[env.entry["metadata"]["source_index"]]["question"] == question


def test_the_dataset_is_built_on_the_first_reset_and_shared(monkeypatch: pytest.MonkeyPatch):
    builds = []
    create = reasoning_gym.create_dataset

    def counting(name: str, **kwargs: Any) -> Any:
        builds.append(name)
        return create(name, **kwargs)

    monkeypatch.setattr(reasoning_gym, "create_dataset", counting)
    envs = [gem.make("rg:letter_counting", seed=i, dataset_seed=1234) for i in range(3)]
    assert builds == []
    for env in envs:
        env.reset()
    assert builds == ["letter_counting"]
    assert envs[0].dataset is envs[1].dataset is envs[2].dataset


def test_a_vector_env_shares_one_dataset():
    vec = gem.make_vec("rg:simple_equations", num_envs=4)
    vec.reset()
    assert len({id(env.dataset) for env in vec.envs}) == 1
    assert len({env.entry["question"] for env in vec.envs}) > 1  # each env its own draws


def test_spawn_and_get_state_leave_the_dataset_shared():
    env = gem.make("rg:leg_counting")
    env.reset(seed=0)
    clone = env.spawn(same_state=True)
    assert clone.dataset is env.dataset and clone.entry == env.entry
    assert "dataset" not in env.get_state()


def test_a_step_before_reset_raises():
    with pytest.raises(ResetNeeded):
        ReasoningGymEnv("leg_counting").step("\\boxed{4}")


def test_a_step_after_the_episode_raises():
    env = gem.make("rg:leg_counting")
    env.reset(seed=0)
    env.step("\\boxed{4}")
    with pytest.raises(ResetNeeded):
        env.step("\\boxed{4}")


def test_partial_credit_is_the_reward_and_not_correct():
    env = gem.make("rg:leg_counting")
    env.reset(seed=0)
    # leg_counting keeps reasoning-gym's default verifier: a right answer inside more text earns part
    _, reward, *_, info = env.step(f"\\boxed{{{env.entry['answer']} legs}}")
    assert 0.0 < reward < 1.0 and info == {"status": "ok", "score": reward, "correct": False}


def test_shared_dataset_is_cached_per_arguments():
    assert shared_dataset("leg_counting", 500, 42) is shared_dataset("leg_counting", 500, 42)
    assert shared_dataset("leg_counting", 500, 42) is not shared_dataset("leg_counting", 499, 42)


@pytest.mark.anyio
async def test_a_python_tool_episode_computes_then_answers():
    backend = make_backend("local")
    async with Runtime(backend, PoolConfig(min_idle=1, max_size=2, spec=SPEC)) as runtime:
        env = gem.make("rg:leg_counting")
        for wrap in get_wrapper_fns("python_tool", runtime=runtime):
            env = wrap(env)
        await env.areset(seed=0)
        answer = env.entry["answer"]  # what a model would work out with the tool
        tool_obs, _, terminated, _, info = await env.astep(f"<python>print({answer!r})</python>")
        assert tool_obs.startswith(f"Code execution result: {answer}") and info["tool_status"] == "ok"
        assert not terminated
        _, reward, terminated, _, info = await env.astep(f"The total is \\boxed{{{answer}}}.")
        assert reward == 1.0 and terminated and info["status"] == "ok" and info["correct"]
        await env.aclose()
    await backend.aclose()
