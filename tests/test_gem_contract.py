"""GEM's env contract, checked against the real gem-llm: the same scripted play through both
stacks gives the same observations, rewards and infos wherever both are deterministic.

Where the catalogue's games deliberately differ from GEM's (documented fixes), the wrapper and
vector mechanics are compared on :func:`gem_style_env`, an env written in GEM's style and
defined here on either stack's ``Env``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import pytest

gem = pytest.importorskip("gem", reason="gem-llm is not installed (pip install 'gem-sandbox[gem]')")
import gem.utils.constants as gem_constants  # noqa: E402
import gem.utils.parsing as gem_parsing  # noqa: E402
import gem.utils.qa_em as gem_qa_em  # noqa: E402
import gem.utils.seeding as gem_seeding  # noqa: E402
from gem.vector.async_vector_env import AsyncVectorEnv as GemAsyncVectorEnv  # noqa: E402
from gem.vector.sync_vector_env import SyncVectorEnv as GemSyncVectorEnv  # noqa: E402
from gem.vector.vector_env import AutoresetMode as GemAutoresetMode  # noqa: E402
from gem.vector.vector_env import VectorEnv as GemVectorEnv  # noqa: E402
from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper as GemTracking  # noqa: E402
from gem.wrappers.observation_wrapper import ObservationWrapper as GemObservation  # noqa: E402
from gem.wrappers.wrapper_factory import get_wrapper_fns as gem_wrapper_fns  # noqa: E402

import gem_sandbox as gs  # noqa: E402
from gem_sandbox.sync import run_sync  # noqa: E402
from gem_sandbox.utils import constants, parsing, qa_em, seeding  # noqa: E402
from gem_sandbox.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv  # noqa: E402
from gem_sandbox.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper  # noqa: E402
from gem_sandbox.wrappers.observation_wrapper import ObservationWrapper  # noqa: E402
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns  # noqa: E402


class FakeTokenizer:
    """Renders chat messages the way a chat template would, visibly."""

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


def gem_style_env(base: type) -> type:
    """A countdown written as GEM's docs write envs, on ``base`` (``gem.Env`` or ours): it
    stores its settings, calls ``super().reset(seed)`` and returns GEM's tuples. Its episodes
    come from a generator of its own that ``reset(seed)`` reseeds, so that GEM's threaded
    vector env cannot reorder them; an action ``"cut"`` truncates, one with ``tool`` in it is
    answered as a tool call would be (``use_tool``, ``parsed_action``)."""

    class Countdown(base):  # type: ignore[misc, valid-type]
        def __init__(self, length: int = 2, **_: Any) -> None:
            super().__init__()
            self.length = length
            self.draw = random.Random(0)

        def reset(self, seed: int | None = None):
            super().reset(seed)
            if seed is not None:
                self.draw = random.Random(seed)
            self.secret, self.left = self.draw.randint(0, 999), self.length
            return f"start {self.secret}", {"secret": self.secret, "suffix": "|"}

        def step(self, action: str):
            self.left -= 1
            info: dict[str, Any] = {"left": self.left, "prefix": ">"}
            if "tool" in action:
                info.update(use_tool=True, parsed_action=action.split(" ")[0])
            terminated, truncated = self.left == 0, action == "cut"
            return f"{action}: {self.left} left", float(terminated) + 0.25, terminated, truncated, info

        def sample_random_action(self) -> str:
            return "go"

    return Countdown


GemCountdown, Countdown = gem_style_env(gem.Env), gem_style_env(gs.Env)


def gem_global_random_env(base: type) -> type:
    """GEM's other style: the episode is drawn from the global ``random`` after
    ``super().reset(seed)``, which seeds it (GEM's base does)."""

    class Dice(base):  # type: ignore[misc, valid-type]
        def __init__(self, sides: int = 6) -> None:
            super().__init__()
            self.sides = sides

        def reset(self, seed: int | None = None):
            super().reset(seed)
            self.target = random.randint(1, self.sides)
            self.noise = float(np.random.rand())
            return f"roll 1-{self.sides}", {}

        def step(self, action: str):
            assert super().step(action) is None  # GEM's base step is abstract: nothing, None
            won = action == str(self.target)
            return ("won" if won else "no"), float(won), True, False, {}

    return Dice


def plain(batch: Any) -> Any:
    """A vector env's return, comparable: arrays as lists, our SAME_STEP extras left out."""
    if isinstance(batch, np.ndarray):
        return batch.tolist()
    if isinstance(batch, dict):
        return {k: plain(v) for k, v in batch.items() if k not in ("final_obs", "final_info")}
    if isinstance(batch, (list, tuple)):
        return [plain(x) for x in batch]
    return batch


def play(env: Any, actions: Sequence[Any], seed: int | None = 3) -> list[Any]:
    """Reset with ``seed`` and step through ``actions`` (a single env: until its episode
    ends): every return, comparable."""
    out = [plain(env.reset(seed=seed))]
    for action in actions:
        out.append(plain(result := env.step(action)))
        if not isinstance(env, (VectorEnv, GemVectorEnv)) and (result[2] or result[3]):
            break
    return out


# -- the base class ------------------------------------------------------------------------
def test_super_reset_seeds_the_global_generators_as_gems_base_does():
    GemDice, Dice = gem_global_random_env(gem.Env), gem_global_random_env(gs.Env)
    for seed in range(5):
        theirs, ours = GemDice(sides=100), Dice(sides=100)
        theirs.reset(seed)  # positional, as OpenRLHF's example calls it
        ours.reset(seed)
        assert (ours.target, ours.noise) == (theirs.target, theirs.noise)
        assert ours.step(str(ours.target)) == theirs.step(str(theirs.target)) == ("won", 1.0, True, False, {})


def test_a_gem_style_env_plays_the_same_through_both_stacks():
    actions = ["a", "tool call", "b", "c"]
    theirs, ours = GemCountdown(length=3), Countdown(length=3)
    assert play(ours, actions[:3]) == play(theirs, actions[:3])
    with pytest.raises(gs.ResetNeeded):  # where GEM would play on (a documented difference)
        ours.step("d")


# -- settings before reset --------------------------------------------------------------------
#: Game ids gem-llm constructs offline (its Hangman, Wordle and WordSearch download words).
FIXED_GAMES = [
    "game:GuessTheNumber-v0-easy",
    "game:GuessTheNumber-v0-hard",
    "game:Mastermind-v0-hard",
    "game:Minesweeper-v0-easy",
    "game:Sudoku-v0-easy",
    "game:TowerofHanoi-v0-hard",
    "game:Game2048-v0-easy",
    "game:FifteenPuzzle-v0-easy",
    "game:Sokoban-v0-easy",
    "game:Crosswords-v0-easy",
]


@pytest.mark.parametrize("env_id", FIXED_GAMES)
def test_max_turns_and_every_setting_are_gems_before_the_first_reset(env_id: str):
    from gem.envs.registration import ENV_REGISTRY as GEMS

    theirs, ours = gem.make(env_id), gs.make(env_id)
    for name in GEMS[env_id].kwargs:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.max_turns == theirs.max_turns


def test_openrlhfs_agent_reads_max_turns_right_after_make():
    """OpenRLHF's example: ``gem.make(id, seed=time.time_ns()).max_turns`` (its plain ``-v0`` id
    is not registered by gem-llm 0.1.0; the catalogue keeps it, as GEM's README's 1-20 game)."""
    env = gs.make("game:GuessTheNumber-v0-hard", seed=123)
    assert env.max_turns == gem.make("game:GuessTheNumber-v0-hard", seed=123).max_turns == 7
    assert gs.make("game:GuessTheNumber-v0", seed=123).max_turns == 20


def test_random_variants_draw_their_settings_per_episode():
    """GEM draws a ``-random`` game's settings in its constructor (which resets); here they
    are drawn by each reset, and read None until the first (a documented difference)."""
    theirs, ours = gem.make("game:GuessTheNumber-v0-random"), gs.make("game:GuessTheNumber-v0-random")
    assert isinstance(theirs.max_turns, int) and ours.max_turns is None
    theirs.reset(seed=4)
    ours.reset(seed=4)
    assert (ours.min_number, ours.max_number, ours.max_turns) == (theirs.min_number, theirs.max_number, theirs.max_turns)


def test_constructor_settings_an_env_keeps_elsewhere_are_exposed_if_plain():
    class Keeps(gs.Env):
        def __init__(self, level: int = 3, names: tuple[str, ...] = ("a",), model: Any = None, seed: int | None = None):
            super().__init__(seed)
            self.config = (level, names, model)

    env = Keeps(level=5, model=object())
    assert (env.level, env.names) == (5, ("a",))
    assert not hasattr(env, "model") and not hasattr(env, "seed")  # not plain data; the seed is rng's


# -- spawn --------------------------------------------------------------------------------------
def test_spawn_with_a_seed_reseeds_the_child():
    parent = gs.make("game:GuessTheNumber-v0-hard", seed=0)
    parent.reset()
    children = [parent.spawn(seed=s) for s in range(100, 104)]
    theirs = gem.make("game:GuessTheNumber-v0-hard")
    expected = []
    for s in range(100, 104):
        theirs.reset(seed=s)
        expected.append(theirs.game_number)
    assert [c.target for c in children] == expected and len(set(expected)) > 1


def test_spawn_same_state_with_a_seed_keeps_the_episode_and_reseeds_the_next():
    parent = gs.make("game:GuessTheNumber-v0-hard", seed=0)
    parent.reset(seed=1)
    parent.step("\\boxed{20}")
    child = parent.spawn(same_state=True, seed=7)
    assert (child.target, child.turn_count) == (parent.target, 1)
    child.reset()
    fresh = gs.make("game:GuessTheNumber-v0-hard")
    fresh.reset(seed=7)
    assert child.target == fresh.target


def stack(env: Any, observation: type = ObservationWrapper, tracking: type = EpisodeTrackingWrapper) -> Any:
    return tracking(observation(env, include_action=True, include_chat_template=False))


def test_spawning_a_wrapped_env_gives_the_child_its_own_history():
    parent = stack(Countdown(length=4))
    parent.reset(seed=1)
    parent.step("a")
    history = list(parent.env.obs_queue)
    child = parent.spawn(seed=9)
    assert child.env.obs_queue[0][0] == f"start {random.Random(9).randint(0, 999)}"
    child.step("x")
    child.step("y")
    assert list(parent.env.obs_queue) == history and parent.step_counter == 1
    twin = parent.spawn(same_state=True)
    assert twin.step("b") == parent.step("b")  # the same episode, carried on independently
    assert twin.env.obs_queue is not parent.env.obs_queue


# -- state copies -------------------------------------------------------------------------------
def test_get_state_and_set_state_carry_every_wrappers_state():
    """oat's GRPO example: ``envs[j].set_state(deepcopy(envs[i].get_state()))``."""
    envs = [stack(Countdown(length=5)) for _ in range(2)]
    envs[0].reset(seed=1)
    envs[0].step("a")
    envs[1].reset(seed=2)
    envs[1].set_state(copy.deepcopy(envs[0].get_state()))
    assert envs[1].step("b") == envs[0].step("b")
    envs[1].step("c")  # sharing nothing: the other one is not moved
    assert envs[0].step_counter == 2 and len(envs[0].env.obs_queue) == 3
    assert envs[1].step_counter == 3 and len(envs[1].env.obs_queue) == 4


@pytest.mark.parametrize("chat", [False, True])
def test_deepcopy_of_a_wrapped_env_continues_as_gems_does(chat: bool):
    tokenizer = FakeTokenizer()
    kwargs = dict(include_action=True, include_chat_template=chat, tokenizer=tokenizer)
    theirs = GemTracking(GemObservation(GemCountdown(length=5), **kwargs))
    ours = EpisodeTrackingWrapper(ObservationWrapper(Countdown(length=5), **kwargs))
    assert play(ours, ["a", "tool b"]) == play(theirs, ["a", "tool b"])
    their_copy, our_copy = copy.deepcopy(theirs), copy.deepcopy(ours)
    assert [plain(our_copy.step(a)) for a in "cd"] == [plain(their_copy.step(a)) for a in "cd"]
    assert plain(ours.step("e")) == plain(theirs.step("e"))  # the originals were not moved
    assert our_copy.env.tokenizer is tokenizer  # configuration is shared, state is not


# -- any GEM env inside our wrappers ------------------------------------------------------------
@pytest.mark.parametrize("face", ["sync", "async"])
def test_our_wrappers_wrap_a_plain_gem_env(face: str):
    actions = ["\\boxed{3}", "\\boxed{8}", "\\boxed{5}"]
    theirs = GemTracking(GemObservation(gem.make("game:GuessTheNumber-v0-hard"), include_chat_template=False))
    ours = stack(gem.make("game:GuessTheNumber-v0-hard"))
    if face == "sync":
        got = play(ours, actions)
    else:

        async def play_async() -> list[Any]:
            out = [plain(await ours.areset(seed=3))]
            return out + [plain(await ours.astep(a)) for a in actions]

        got = run_sync(play_async)
    assert got == play(theirs, actions)
    ours.close()  # GEM's envs have no close: nothing to forward to
    run_sync(ours.aclose)
    assert ours.env_id == "game:GuessTheNumber-v0-hard" == theirs.env_id


def test_our_tool_wrapper_wraps_a_plain_gem_env():
    """The calculator needs no sandbox: what is checked is that a sync-only GEM env steps."""
    from gem_sandbox.tools import CalculatorTool
    from gem_sandbox.wrappers import ToolEnvWrapper

    env = ToolEnvWrapper(gem.make("game:GuessTheNumber-v0-hard"), tools=[CalculatorTool()])
    env.reset(seed=3)
    obs, reward, terminated, _, info = env.step("<calculator>2+3</calculator>")
    assert "5" in obs and not terminated and info["tool_type"]
    obs, reward, terminated, _, info = env.step("\\boxed{25}")
    assert not info.get("tool_type") or info["tool_type"] != "calculator"
    state = env.get_state()
    assert state["tool_use_counter"] == 1
    env.close()


def echo_tool(base: type) -> type:
    """A tool written as GEM's docs write tools, on ``base`` (GEM's BaseTool or ours)."""

    class Echo(base):  # type: ignore[misc, valid-type]
        tool_type = "echo"

        def instruction_string(self) -> str:
            return "Echo text with <echo>...</echo>."

        def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
            start, end = action.find("<echo>"), action.find("</echo>")
            if start < 0 or end < 0:
                return False, False, "", action
            text = action[start + len("<echo>") : end]
            return True, text == "fail", f"echo: {text}", action[: end + len("</echo>")]

    return Echo


def test_a_tool_written_for_gem_answers_as_in_gems_wrapper():
    from gem.tools.base_tool import BaseTool as GemBaseTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper as GemToolEnvWrapper

    from gem_sandbox.tools.base_tool import BaseTool
    from gem_sandbox.wrappers import ToolEnvWrapper

    actions = ["<echo>hi</echo> and more", "<echo>fail</echo>", "\\boxed{25}", "<echo>again</echo>"]
    theirs = GemToolEnvWrapper(GemCountdown(length=3), tools=[echo_tool(GemBaseTool)()], tool_reward=0.1)
    ours = ToolEnvWrapper(Countdown(length=3), tools=[echo_tool(BaseTool)()], tool_reward=0.1)
    assert play(ours, actions) == play(theirs, actions)
    ours.close()


def test_a_plain_gem_env_has_state_and_spawns_as_gem_says():
    ours = stack(GemCountdown(length=3))
    ours.reset(seed=1)
    state = ours.get_state()
    first = ours.step("a")
    ours.set_state(state)
    assert ours.step("a") == first
    with pytest.raises(NotImplementedError):  # GEM's base spawn
        ours.spawn()


@pytest.mark.parametrize("cls", [SyncVectorEnv, AsyncVectorEnv])
def test_our_vector_envs_step_plain_gem_envs(cls: type):
    fns = [partial(GemCountdown, length=n) for n in (1, 2)]
    ours = cls(["c", "c"], [lambda fn=fn: ObservationWrapper(fn(), include_chat_template=False) for fn in fns])
    theirs = GemSyncVectorEnv(["c", "c"], [lambda fn=fn: GemObservation(fn(), include_chat_template=False) for fn in fns])
    script = [["a", "b"], ["c", "d"], {1: "e"}]
    assert play(ours, script) == play(theirs, script)
    ours.close()


def shouting(base: type) -> type:
    """A wrapper written GEM's way, on ``base``: it overrides only the sync ``step``."""

    class Shout(base):  # type: ignore[misc, valid-type]
        def step(self, action: str):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs.upper(), reward, terminated, truncated, info

    return Shout


@pytest.mark.parametrize("inner", [Countdown, GemCountdown], ids=["ours", "gem-llm's"])
def test_a_wrapper_written_for_gem_is_not_bypassed_by_the_async_face(inner: type):
    vec = AsyncVectorEnv([shouting(gs.EnvWrapper)(inner(length=2)), shouting(gs.EnvWrapper)(inner(length=2))])
    vec.reset(seed=0)
    assert vec.step(["a", "b"])[0] == ["A: 1 LEFT", "B: 1 LEFT"]
    vec.close()


def test_a_gem_style_subclass_of_the_observation_wrapper_steps_as_on_gems_vector_env():
    ours = AsyncVectorEnv(
        [shouting(ObservationWrapper)(Countdown(length=n), include_chat_template=False) for n in (1, 2)]
    )
    theirs = GemAsyncVectorEnv(
        ["c", "c"],
        [partial(shouting(GemObservation), GemCountdown(length=n), include_chat_template=False) for n in (1, 2)],
    )
    script = [["a", "b"], ["c", "d"], ["e", "f"]]
    assert play(ours, script) == play(theirs, script)
    ours.close()
    theirs.thread_pool_executer.shutdown()


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_gem_style_subclass_of_the_tool_wrapper_keeps_both_faces(face: str):
    """The tool wrapper's sync face runs its async one; a subclass overriding only ``step``
    still gets one tool call per step, through either face."""
    from gem_sandbox.tools.calculator import CalculatorTool
    from gem_sandbox.wrappers import ToolEnvWrapper

    env = shouting(ToolEnvWrapper)(Countdown(length=2), tools=[CalculatorTool()])
    if face == "sync":
        env.reset(seed=0)
        obs, *_, info = env.step("<calculator>6*7</calculator>")
    else:
        run_sync(env.areset, seed=0)
        obs, *_, info = run_sync(env.astep, "<calculator>6*7</calculator>")
    assert obs == "CALCULATOR RESULT: 42\n" and info["tool_use_counter"] == 1
    assert not [k for k in vars(env) if k.startswith("__")]  # no mark left behind


# -- GEM's exception types ------------------------------------------------------------------
def test_an_unknown_id_is_a_value_error_as_in_gem():
    for make in (gem.make, gs.make):
        with pytest.raises(ValueError):
            make("game:NoSuchGame-v0")
    with pytest.raises(KeyError):  # and still the lookup error it was
        gs.make("game:NoSuchGame-v0")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, AssertionError),  # a chat template without a tokenizer
        ({"include_action": False, "tokenizer": FakeTokenizer()}, AssertionError),
        ({"apply_chat_template_on_reset": True, "tokenizer": FakeTokenizer()}, ValueError),
    ],
)
def test_observation_wrapper_configuration_errors_are_gems_types(kwargs: dict[str, Any], error: type):
    with pytest.raises(error):
        GemObservation(GemCountdown(), **kwargs)
    with pytest.raises(error):
        ObservationWrapper(Countdown(), **kwargs)


def test_batch_size_errors_are_gems_assertion_errors():
    theirs = GemSyncVectorEnv(["c"] * 2, [GemCountdown] * 2)
    ours = SyncVectorEnv(["c"] * 2, [Countdown] * 2)
    for vec in (theirs, ours):
        with pytest.raises(AssertionError):
            vec.reset(seed=[1, 2, 3])
        vec.reset(seed=0)
        with pytest.raises(AssertionError):
            vec.step(["a"])
    with pytest.raises(ValueError):
        ours.step(["a"])


def test_a_second_registration_and_an_unknown_wrapper_fail_as_in_gem():
    with pytest.raises(ValueError):
        gs.register("game:GuessTheNumber-v0-easy", "x:Y")
    with pytest.raises(KeyError):
        get_wrapper_fns("no_such_wrapper")
    with pytest.raises(KeyError):
        gem_wrapper_fns("no_such_wrapper")


# -- vector envs ---------------------------------------------------------------------------------
def test_a_vector_env_is_an_env_with_gems_constructor_and_env_fns():
    fns = [partial(Countdown, length=n) for n in (1, 2, 3)]
    vec = SyncVectorEnv(env_ids=["c"] * 3, env_fns=fns, autoreset_mode=GemAutoresetMode.NEXT_STEP)
    assert isinstance(vec, gs.Env) and isinstance(vec, VectorEnv)
    assert vec.autoreset_mode is AutoresetMode.NEXT_STEP and vec.env_fns == fns
    assert vec.env_fns[2]().length == 3 and vec.env_ids == ["c"] * 3 and vec.num_envs == 3
    assert AutoresetMode("SameStep") is AutoresetMode("same_step") is AutoresetMode.SAME_STEP
    built = AsyncVectorEnv([Countdown(length=4)])  # from envs already made: env_fns spawn like them
    assert built.env_fns[0]().length == 4 and built.env_fns[0]() is not built.envs[0]
    assert isinstance(gs.make_vec("game:GuessTheNumber-v0", num_envs=2).env_fns[1](), gs.Env)
    vec.close()
    built.close()


SCRIPT = [["a", "b", "c"], {0: "x", 2: "y"}, ["cut", "tool b", "c"], ["a", "a", "a"], {1: "z"}, ["q", "r", "s"]]


@pytest.mark.parametrize("mode", ["SAME_STEP", "NEXT_STEP"])
@pytest.mark.parametrize(("ours_cls", "gem_cls"), [(SyncVectorEnv, GemSyncVectorEnv), (AsyncVectorEnv, GemAsyncVectorEnv)])
def test_autoreset_and_subset_steps_match_gems_vector_envs(mode: str, ours_cls: type, gem_cls: type):
    lengths = (1, 2, 3)
    theirs = gem_cls(["c"] * 3, [partial(GemCountdown, length=n) for n in lengths], GemAutoresetMode[mode])
    ours = ours_cls(["c"] * 3, [partial(Countdown, length=n) for n in lengths], AutoresetMode[mode])
    assert play(ours, SCRIPT, seed=7) == play(theirs, SCRIPT, seed=7)
    ours.close()
    if hasattr(theirs, "thread_pool_executer"):
        theirs.thread_pool_executer.shutdown()


def test_same_step_keeps_the_final_observation_gem_drops():
    vec = SyncVectorEnv(["c"], [partial(Countdown, length=1)])
    vec.reset(seed=0)
    obs, _, terminated, _, infos = vec.step(["a"])
    assert terminated.tolist() == [True] and obs[0].startswith("start")
    assert infos[0]["final_obs"] == "a: 0 left" and infos[0]["final_info"]["left"] == 0


@pytest.mark.parametrize("async_mode", [False, True])
def test_make_vec_of_a_game_matches_gems(async_mode: bool):
    """GuessTheNumber plays exactly as GEM's; compared up to the episodes' ends, after which
    GEM's autoreset draws from the global ``random`` and this one from each env's own."""
    env_id, wrappers = "game:GuessTheNumber-v0-easy", "concat_with_action,episode_tracking"
    theirs = gem.make_vec([env_id] * 3, wrappers=gem_wrapper_fns(wrappers), async_mode=False)
    ours = gs.make_vec([env_id] * 3, wrappers=get_wrapper_fns(wrappers), async_mode=async_mode)
    assert plain(ours.reset(seed=10)) == plain(theirs.reset(seed=10))
    misses = [[f"\\boxed{{{(env.unwrapped.target + k) % 10 + 1}}}" for env in ours.envs] for k in range(3)]
    for actions in misses:
        assert plain(ours.step(actions)) == plain(theirs.step(actions))
    ours.close()


# -- games and observation wrappers, both stacks -------------------------------------------
#: Scripts of well-formed moves: an action without a boxed move gets a more helpful message here
#: than GEM's (a documented difference), so none is in them.
GAMES = {
    "game:GuessTheNumber-v0-easy": ["\\boxed{5}", "\\boxed{3}", "\\boxed{5}", "\\boxed{11}", "\\boxed{8}"],
    "game:GuessTheNumber-v0-hard": ["\\boxed{25}", "\\boxed{25}", "\\boxed{12}", "\\boxed{60}"],
    "game:GuessTheNumber-v0-random": ["\\boxed{9}", "\\boxed{20}", "\\boxed{14}", "\\boxed{2}"],
}


@pytest.mark.parametrize("env_id", GAMES)
@pytest.mark.parametrize("seed", [0, 5])
def test_games_play_as_gems(env_id: str, seed: int):
    assert play(gs.make(env_id), GAMES[env_id], seed) == play(gem.make(env_id), GAMES[env_id], seed)


def test_tower_of_hanoi_moves_as_gems():
    """Its rules text says how many turns there are (GEM's does not); the moves are GEM's
    (but for a move onto the same tower, which GEM reports as a move)."""
    actions = ["\\boxed{A C}", "\\boxed{A B}", "\\boxed{C B}", "\\boxed{A C}", "\\boxed{B A}"]
    ours, theirs = play(gs.make("game:TowerofHanoi-v0-easy"), actions), play(gem.make("game:TowerofHanoi-v0-easy"), actions)
    assert ours[0][1] == theirs[0][1] and ours[1:] == theirs[1:]


FACTORY_NAMES = ["concat", "concat_with_action", "concat_chat", "concat_chat_on_reset"]


@pytest.mark.parametrize("names", [f"{n},episode_tracking" for n in FACTORY_NAMES])
def test_factory_observation_wrappers_match_gems_on_a_game(names: str):
    tokenizer = FakeTokenizer()
    actions = GAMES["game:GuessTheNumber-v0-easy"]

    def wrapped(make: Callable[[str], Any], fns: list[Callable[[Any], Any]]) -> Any:
        env = make("game:GuessTheNumber-v0-easy")
        for fn in fns:
            env = fn(env)
        return env

    ours = wrapped(gs.make, get_wrapper_fns(names, tokenizer=tokenizer))
    theirs = wrapped(gem.make, gem_wrapper_fns(names, tokenizer=tokenizer))
    assert play(ours, actions) == play(theirs, actions)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(include_action=False, include_chat_template=False),
        dict(include_action=True, include_chat_template=False),
        dict(include_action=True, include_chat_template=True),
        dict(include_action=True, include_chat_template=False, apply_chat_template_on_reset=True),
        dict(include_action=True, include_chat_template=False, max_history_length=1),
        dict(include_action=True, include_chat_template=True, max_history_length=2),
    ],
)
def test_observation_wrapper_mechanics_match_gems(kwargs: dict[str, Any]):
    """Prefix and suffix, parsed actions and the tool role, history limits: on the
    GEM-style env through both stacks, past an episode's end and a reset."""
    tokenizer = FakeTokenizer()
    ours = EpisodeTrackingWrapper(ObservationWrapper(Countdown(length=3), tokenizer=tokenizer, **kwargs))
    theirs = GemTracking(GemObservation(GemCountdown(length=3), tokenizer=tokenizer, **kwargs))
    actions = ["a", "tool b", "c"]
    assert play(ours, actions) == play(theirs, actions)
    assert play(ours, actions, seed=None) == play(theirs, actions, seed=None)  # prev_ep_ counters


# -- GEM's helpers under GEM's names ----------------------------------------------------------------
TEXTS = [
    "\\boxed{3}",
    "\\fbox{3}",
    "a \\boxed{1} then \\boxed{\\frac{1}{2}}",
    "\\boxed {3}",
    "\\boxed{unclosed",
    "\\boxed}{x}",
    "\\fbox{2} and \\boxed{4}",
    "no box",
    "\\boxed{}",
    "<answer> Paris </answer> or <answer>Rome</answer>",
    "```python\nprint(1)\n```\ntext\n```\nx = 2\n```",
    "```\nunclosed",
]


@pytest.mark.parametrize(
    "name",
    ["last_boxed_only_string", "extract_last_boxed_answer", "extract_code_from_model", "extract_last_tagged_answer"],
)
def test_gems_parsing_helpers_behave_as_gems(name: str):
    for text in TEXTS:
        assert getattr(parsing, name)(text) == getattr(gem_parsing, name)(text), text
    for s in [None, "\\boxed{x}", "\\fbox{x}", "\\boxed{x", "x"]:
        assert parsing.remove_boxed(s) == gem_parsing.remove_boxed(s)


def test_gems_boxed_answer_differs_from_ours_on_fbox():
    assert parsing.extract_last_boxed_answer("\\fbox{3}") is None  # GEM's behaviour
    assert parsing.last_boxed_answer("\\fbox{3}") == "3"  # the project's, unchanged


def test_seeding_qa_em_and_constants_are_gems():
    ours, _ = seeding.np_random(3)
    theirs, _ = gem_seeding.np_random(3)
    assert ours.integers(0, 1000, 5).tolist() == theirs.integers(0, 1000, 5).tolist()
    assert seeding.np_random(3)[1] == gem_seeding.np_random(3)[1]
    for bad in (-1, "3"):
        with pytest.raises(Exception):  # noqa: B017 - GEM raises a bare Exception
            gem_seeding.np_random(bad)
        with pytest.raises(Exception):  # noqa: B017
            seeding.np_random(bad)
    seeding.set_seed(11)
    drawn = (random.random(), np.random.rand())
    gem_seeding.set_seed(11)
    assert drawn == (random.random(), np.random.rand())
    for prediction, golden in [("The Paris!", "paris"), ("an apple", ["pear", "Apple"]), ("x", "y")]:
        assert qa_em.em_check(prediction, golden) == gem_qa_em.em_check(prediction, golden)
        assert qa_em.normalize_answer(prediction) == gem_qa_em.normalize_answer(prediction)
    assert constants.TERMINAL_STATE == gem_constants.TERMINAL_STATE
    rewards = [n for n in vars(gem_constants.LanguageGameReward) if not n.startswith("_")]
    assert {n: getattr(constants.LanguageGameReward, n) for n in rewards} == {
        n: getattr(gem_constants.LanguageGameReward, n) for n in rewards
    }


def test_gems_debug_helper_plays_an_episode(capsys: pytest.CaptureFixture[str]):
    from gem_sandbox.utils.debug import run_and_print_episode

    run_and_print_episode(Countdown(length=2), lambda obs: "go")
    out = capsys.readouterr().out
    assert "Step 2" in out and "Step 3" not in out
