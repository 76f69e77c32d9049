"""Registration by id: make, make_vec, print_envs, entry points, errors that help."""

from __future__ import annotations

import pytest

import gem_sandbox as gem
from gem_sandbox.registry import ENV_REGISTRY, UnknownEnvError, matching_ids, registered_envs
from gem_sandbox.vector import AsyncVectorEnv, SyncVectorEnv
from gem_sandbox.wrappers import EpisodeTrackingWrapper
from tests.helpers import CountdownEnv


@pytest.fixture
def countdown_id():
    env_id = "test:Countdown-v0"
    gem.register(env_id, "tests.helpers:CountdownEnv", length=2)
    yield env_id
    del ENV_REGISTRY[env_id]


def test_make_builds_a_registered_env_with_its_kwargs(countdown_id):
    env = gem.make(countdown_id)
    assert env.length == 2 and env.env_id == countdown_id
    assert gem.make(countdown_id, length=7).length == 7


def test_registering_an_id_twice_is_an_error(countdown_id):
    with pytest.raises(ValueError, match="already registered"):
        gem.register(countdown_id, "tests.helpers:CountdownEnv")


def test_an_unknown_id_names_the_closest_ids():
    with pytest.raises(UnknownEnvError, match="did you mean 'game:GuessTheNumber-v0"):
        gem.make("game:GuessTheNumbr-v0")


def test_a_broken_entry_point_is_an_import_error():
    gem.register("test:Broken-v0", "no_such_module:Env")
    try:
        with pytest.raises(ImportError, match="test:Broken-v0"):
            gem.make("test:Broken-v0")
    finally:
        del ENV_REGISTRY["test:Broken-v0"]


def test_the_catalogue_registers_through_the_entry_point_group():
    ids = registered_envs()
    assert "game:GuessTheNumber-v0" in ids
    assert ids["game:GuessTheNumber-v0"].entry_point.startswith("gem_sandbox_envs.")


def test_make_vec_seeds_each_env_and_applies_wrappers(countdown_id):
    vec = gem.make_vec([countdown_id] * 3, wrappers=[EpisodeTrackingWrapper], seed=10)
    assert isinstance(vec, SyncVectorEnv) and vec.num_envs == 3
    assert [env.unwrapped._seed for env in vec.envs] == [10, 11, 12]
    assert all(isinstance(env, EpisodeTrackingWrapper) for env in vec.envs)
    assert isinstance(gem.make_vec(countdown_id, num_envs=2, async_mode=True), AsyncVectorEnv)


@pytest.mark.parametrize("async_mode", [False, True])
def test_make_vec_steps_its_envs_as_one_batch(countdown_id, async_mode):
    vec = gem.make_vec(countdown_id, num_envs=2, async_mode=async_mode)
    vec.reset()
    vec.step(["a", "b"])
    _, rewards, terminated, _, infos = vec.step(["a", "b"])  # length 2: both end, and autoreset
    assert terminated.tolist() == [True, True] and rewards.tolist() == [1.0, 1.0]
    assert [info["final_obs"] for info in infos] == ["left 0", "left 0"]
    vec.close()


def test_make_vec_per_env_kwargs(countdown_id):
    vec = gem.make_vec([countdown_id] * 2, vec_kwargs=[{"length": 4}, {"length": 5}])
    assert [env.length for env in vec.envs] == [4, 5]


def test_print_envs_lists_ids_with_kwargs(capsys):
    gem.print_envs("GuessTheNumber")
    out = capsys.readouterr().out
    assert "game:GuessTheNumber-v0-hard" in out and "max_number=50" in out
    assert all("GuessTheNumber" in line for line in out.splitlines())
    assert all(line.split()[1] == "generated" for line in out.splitlines())  # its data source


def test_an_env_says_where_its_data_comes_from():
    class Sampled(gem.Env):
        @classmethod
        def describe_source(cls, **kwargs):
            return f"local file {kwargs['data_path']}"

    spec = gem.EnvSpec("test:Sampled", Sampled, {"data_path": "/data/x.jsonl"})
    assert spec.source() == "local file /data/x.jsonl"
    assert gem.EnvSpec("test:Plain", CountdownEnv).source() == "generated"


def test_matching_ids_accepts_globs():
    assert matching_ids("game:Wordle*") and all(i.startswith("game:Wordle") for i in matching_ids("game:Wordle*"))
