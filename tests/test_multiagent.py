"""GEM's multi-agent interface (``gem_sandbox.multiagent``) and the two multi-agent games, checked
against gem-llm's own ``gem.multiagent`` where the two are meant to agree."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from gem_sandbox.core import InvalidAction, ResetNeeded
from gem_sandbox.multiagent import AgentSelector, InvalidActions, MultiAgentEnv, MultiStepReturn
from gem_sandbox.registry import make
from gem_sandbox_envs.multiagent import register_all
from gem_sandbox_envs.multiagent.rock_paper_scissors import P0, P1, RockPaperScissorsEnv
from gem_sandbox_envs.multiagent.tic_tac_toe import O, X, TicTacToeEnv

# Registering again is a no-op; it makes these tests independent of the catalogue's entry point.
register_all()


class Relay(MultiAgentEnv):
    """Echoes each action: it pays its length, ``exit`` terminates the agent, ``quit`` truncates
    it. Returns only the acting agents' entries, leaving the bookkeeping to the base class."""

    blocking = False

    def __init__(self, mode: str | None = "sequential", agents: tuple[str, ...] = ("a", "b", "c"),
                 seed: int | None = None) -> None:
        super().__init__(seed)
        self.possible_agents = list(agents)
        self.agent_selector = AgentSelector(self.possible_agents, mode=mode) if mode else None
        self.log: list[str] = []
        self.token = 0

    def new_episode(self) -> None:
        self.log, self.token = [], self.rng.randrange(10**9)

    def observe(self, agent: str) -> str:
        return f"{agent} after {self.log}"

    def _process_actions(self, actions: dict[str, str]) -> MultiStepReturn:
        self.log.extend(f"{agent}:{text}" for agent, text in actions.items())
        return (
            {agent: self.observe(agent) for agent in actions},
            {agent: float(len(text)) for agent, text in actions.items()},
            {agent: text == "exit" for agent, text in actions.items()},
            {agent: text == "quit" for agent, text in actions.items()},
            {agent: {"echo": text} for agent, text in actions.items()},
        )


def turn_order(env: MultiAgentEnv, steps: int) -> list[str]:
    order = []
    for _ in range(steps):
        (agent,) = env.get_active_agents()
        order.append(agent)
        env.step({agent: "go"})
    return order


# -- the interface ---------------------------------------------------------------------------
def test_sequential_agents_take_turns_in_order():
    env = Relay()
    obs, infos = env.reset()
    assert list(obs) == ["a", "b", "c"] and infos == {"a": {}, "b": {}, "c": {}}
    assert turn_order(env, 7) == ["a", "b", "c", "a", "b", "c", "a"]


def test_parallel_agents_act_together_and_no_selector_means_parallel():
    for mode in ("parallel", None):
        env = Relay(mode=mode)
        env.reset()
        assert env.get_active_agents() == ["a", "b", "c"]
        obs, rewards, term, trunc, infos = env.step({"a": "x", "b": "yy", "c": "zzz"})
        assert rewards == {"a": 1.0, "b": 2.0, "c": 3.0}
        assert obs["c"] == "c after ['a:x', 'b:yy', 'c:zzz']" and infos["b"] == {"echo": "yy"}
        assert env._cumulative_rewards == {"a": 1.0, "b": 2.0, "c": 3.0}


def test_rewards_accumulate_and_the_last_step_is_recorded():
    env = Relay(mode="parallel")
    env.reset()
    env.step({"a": "x", "b": "yy", "c": ""})
    env.step({"a": "xxxx", "b": "y", "c": ""})
    assert env.rewards == {"a": 4.0, "b": 1.0, "c": 0.0}
    assert env._cumulative_rewards == {"a": 5.0, "b": 3.0, "c": 0.0}
    assert env.get_state("a") == ("a after ['a:x', 'b:yy', 'c:', 'a:xxxx', 'b:y', 'c:']", 5.0, False, False,
                                  {"echo": "xxxx"})
    assert set(env.get_active_states()) == {"a", "b", "c"}


def test_done_agents_leave_and_the_step_that_ended_them_still_reports_them():
    env = Relay(mode="parallel")
    env.reset()
    _, rewards, term, trunc, _ = env.step({"a": "exit", "b": "quit", "c": "go"})
    assert term == {"a": True, "b": False, "c": False} and trunc == {"a": False, "b": True, "c": False}
    assert rewards["a"] == 4.0
    assert env.agents == ["c"] and env.get_active_agents() == ["c"]
    assert set(env.terminations) == set(env.truncations) == set(env._cumulative_rewards) == {"c"}
    with pytest.raises(ValueError, match="not in environment"):
        env.get_state("a")
    with pytest.raises(InvalidActions, match="'a' provided action but is done"):
        env.step({"a": "x", "c": "y"})
    env.step({"c": "exit"})
    assert env.agents == []
    with pytest.raises(ResetNeeded, match="every agent is done"):
        env.step({})


def test_the_turn_passes_on_when_the_agent_to_move_leaves():
    # GEM 0.1.0 skips "b" here: its selector does not wrap around when the first agent leaves.
    env = Relay()
    env.reset()
    env.step({"a": "exit"})
    assert env.agents == ["b", "c"]
    assert turn_order(env, 3) == ["b", "c", "b"]
    env = Relay()
    env.reset()
    env.step({"a": "go"})
    env.step({"b": "quit"})
    assert turn_order(env, 3) == ["c", "a", "c"]
    env.step({"a": "exit"})  # the last in the round leaves: "c" is alone
    assert turn_order(env, 2) == ["c", "c"]


def test_malformed_action_dicts_raise_gems_value_error():
    env = Relay()
    env.reset()
    cases = {
        "Actions must be a dict": "go",
        "Missing action for active agent": {},
        "'b' provided action but is not active": {"a": "go", "b": "go"},
        "'zed' provided action but is not in the environment": {"a": "go", "zed": "go"},
    }
    for message, actions in cases.items():
        with pytest.raises(ValueError, match=message) as caught:
            env.step(actions)  # type: ignore[arg-type]
        assert isinstance(caught.value, InvalidActions) and isinstance(caught.value, InvalidAction)
    with pytest.raises(InvalidAction, match="agent 'a' sent NoneType"):
        env.step({"a": None})  # type: ignore[dict-item]
    assert env.log == [] and env._turn == 0  # nothing was played
    env.step({"a": "go"})
    assert env._turn == 1


def test_a_step_before_reset_needs_a_reset():
    with pytest.raises(ResetNeeded, match="call reset"):
        Relay().step({"a": "go"})


def test_reset_clears_the_episode():
    env = Relay(mode="sequential")
    env.reset(seed=1)
    env.step({"a": "exit"})
    env.send_message("b", "c", "hi")
    env.broadcast_message("c", "all")
    env.global_context = "shared notes"
    assert env.shared_memory == [
        {"from": "b", "to": "c", "message": "hi"},
        {"from": "c", "to": "b", "message": "all"},
    ]
    obs, _ = env.reset()
    assert env.agents == ["a", "b", "c"] and list(obs) == ["a", "b", "c"]
    assert env._cumulative_rewards == env.rewards == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert env.terminations == env.truncations == {"a": False, "b": False, "c": False}
    assert env.shared_memory == [] and env.global_context == "" and env.log == []
    assert env.agent_selector is not None and env.agent_selector.selected == "a"
    assert turn_order(env, 2) == ["a", "b"]


def test_messages_need_agents_in_the_episode():
    env = Relay()
    env.reset()
    with pytest.raises(ValueError, match="Sender x"):
        env.send_message("x", "a", "hi")
    with pytest.raises(ValueError, match="Receiver x"):
        env.send_message("a", "x", "hi")
    with pytest.raises(ValueError, match="Sender x"):
        env.broadcast_message("x", "hi")


def test_seeds_reproduce_and_state_snapshots_restore():
    env = Relay()
    env.reset(seed=7)
    first = env.token
    env.reset(seed=7)
    assert env.token == first
    env.reset(seed=8)
    assert env.token != first

    env.reset()
    env.step({"a": "go"})
    snapshot = env.get_state()
    assert isinstance(snapshot, dict)
    env.step({"b": "exit"})
    env.set_state(snapshot)
    assert env.agents == ["a", "b", "c"] and env.get_active_agents() == ["b"] and env._turn == 1


def test_agents_can_join_mid_episode():
    env = Relay()
    env.reset()
    env.add_agent("d")
    assert env.agents == ["a", "b", "c", "d"] and env._cumulative_rewards["d"] == 0.0
    assert turn_order(env, 5) == ["a", "b", "c", "d", "a"]
    env.remove_agent("b")
    assert "b" not in env.terminations and turn_order(env, 3) == ["c", "d", "a"]


def test_a_subclass_step_calling_super_counts_one_turn():
    class Counting(Relay):
        def step(self, actions):
            return super().step(actions)

    env = Counting()
    env.reset()
    env.step({"a": "go"})
    env.step({"b": "go"})
    assert env._turn == 2
    with pytest.raises(InvalidActions):
        env.step({"a": "go"})


def test_the_selector():
    with pytest.raises(ValueError, match="Unknown mode"):
        AgentSelector(["a"], mode="simultaneous")  # type: ignore[arg-type]
    selector = AgentSelector(["a", "b", "c"])
    assert selector.is_first() and not selector.is_last()
    selector.next()
    selector.next()
    assert selector.selected == "c" and selector.is_last()
    selector.remove_agent("a")  # before the selected one: it stays selected
    assert selector.selected == "c" and selector.get_active_agents() == ["c"]
    selector.remove_agent("c")
    selector.remove_agent("b")
    assert selector.selected is None and selector.get_active_agents() == []
    selector.add_agent("z")
    assert selector.get_active_agents() == ["z"]
    parallel = AgentSelector(["a", "b"], mode="parallel")
    parallel.next()
    assert parallel.get_active_agents() == ["a", "b"]


def test_the_async_face():
    async def play() -> list[Any]:
        env = Relay()
        await env.areset(seed=3)
        out = [await env.astep({"a": "go"}), await env.astep({"b": "exit"})]
        with pytest.raises(InvalidActions):
            await env.astep({"a": "go"})
        return out + [env.agents]

    (_, rewards, _, _, _), (_, _, term, _, _), agents = asyncio.run(play())
    assert rewards == {"a": 2.0} and term == {"b": True} and agents == ["a", "c"]


def test_an_async_native_env_gets_a_sync_step():
    class Slow(Relay):
        blocking = True

        async def _aprocess_actions(self, actions):
            await asyncio.sleep(0)
            return Relay._process_actions(self, actions)

        _process_actions = MultiAgentEnv._process_actions  # async only

    env = Slow(mode="parallel")
    assert env.suspends and not Relay().suspends
    env.reset()
    assert env.step({"a": "x", "b": "y", "c": "exit"})[2]["c"] is True
    assert asyncio.run(env.astep({"a": "xx", "b": "y"}))[1] == {"a": 2.0, "b": 1.0}
    assert env._cumulative_rewards == {"a": 3.0, "b": 2.0}


# -- tic-tac-toe -------------------------------------------------------------------------------
def play_tic_tac_toe(env: TicTacToeEnv, moves: list[str]) -> list[MultiStepReturn]:
    """Play ``moves`` (``"row col"``) for whoever is to move."""
    results = []
    for move in moves:
        (agent,) = env.get_active_agents()
        results.append(env.step({agent: f"I will play \\boxed{{{move}}}."}))
    return results


def test_tic_tac_toe_won_by_x():
    env = make("multiagent:TicTacToe-v0")
    obs, _ = env.reset()
    assert "Your move" in obs[X] and "Waiting for X" in obs[O] and "tic-tac-toe" in obs[X]
    results = play_tic_tac_toe(env, ["1 1", "1 2", "2 2", "1 3"])
    obs, rewards, term, _, _ = results[-1]
    assert rewards == {X: 0.0, O: 0.0} and term == {X: False, O: False}
    assert "Your move" in obs[X] and "Waiting for X" in obs[O] and "1  X O O" in obs[X]
    obs, rewards, term, trunc, infos = play_tic_tac_toe(env, ["3 3"])[0]
    assert rewards == {X: 1.0, O: -1.0} and term == {X: True, O: True} and trunc == {X: False, O: False}
    assert infos[O] == {"winner": X, "reason": "win"} and "You won" in obs[X] and "You lost" in obs[O]
    assert env.agents == [] and env.get_active_agents() == []
    with pytest.raises(ResetNeeded):
        env.step({X: r"\boxed{2 1}"})


def test_tic_tac_toe_won_by_o_and_drawn():
    env = TicTacToeEnv()
    env.reset()
    *_, (_, rewards, _, _, _) = play_tic_tac_toe(env, ["1 1", "2 2", "1 2", "1 3", "3 3", "3 1"])
    assert rewards == {X: -1.0, O: 1.0}
    env.reset()
    results = play_tic_tac_toe(env, ["1 1", "2 2", "3 3", "1 2", "3 2", "3 1", "1 3", "2 3", "2 1"])
    obs, rewards, term, _, infos = results[-1]
    assert [r[2][X] for r in results] == [False] * 8 + [True]
    assert rewards == {X: 0.0, O: 0.0} and infos[X] == {"winner": None, "reason": "draw"}
    assert "It is a draw" in obs[O]


@pytest.mark.parametrize(
    "action, problem",
    [(r"\boxed{1 1}", "which is taken"), (r"\boxed{4 1}", "off the board"), ("center please", "no move")],
)
def test_tic_tac_toe_illegal_moves_forfeit(action, problem):
    env = TicTacToeEnv()
    env.reset()
    play_tic_tac_toe(env, ["1 1"])
    obs, rewards, term, _, infos = env.step({O: action})
    assert rewards == {X: 1.0, O: -1.0} and term == {X: True, O: True}
    assert infos[O]["reason"] == "illegal move" and problem in obs[O] and "forfeits" in obs[X]


def test_tic_tac_toe_moves_only_on_its_turn():
    env = TicTacToeEnv()
    env.reset()
    with pytest.raises(ValueError, match="'player_o' provided action but is not active"):
        env.step({X: r"\boxed{1 1}", O: r"\boxed{1 2}"})
    with pytest.raises(ValueError, match="Missing action for active agent.*player_x"):
        env.step({O: r"\boxed{1 1}"})
    assert env.render().count(".") == 9


def random_game(env: MultiAgentEnv, seed: int) -> list[Any]:
    trajectory: list[Any] = [env.reset(seed=seed)]
    while env.agents:
        actions = env.sample_random_action()
        trajectory += [actions, env.step(actions)]
    return trajectory


def test_tic_tac_toe_seeds_reproduce_games_and_the_random_variant_draws_the_first_player():
    env = make("multiagent:TicTacToe-v0-random")
    games = {seed: random_game(env, seed) for seed in range(6)}
    assert random_game(env, 3) == games[3]
    assert len({repr(game) for game in games.values()}) > 1
    firsts = {next(iter(game[1])) for game in games.values()}  # who moved first
    assert firsts == {X, O}
    with pytest.raises(ValueError, match="first_player"):
        TicTacToeEnv(first_player="nobody")


def test_tic_tac_toe_through_the_async_face():
    async def play() -> MultiStepReturn:
        env = make("multiagent:TicTacToe-v0")
        await env.areset()
        result: MultiStepReturn
        for move in ["2 2", "1 1", "1 2", "3 3", "3 2"]:
            (agent,) = env.get_active_agents()
            result = await env.astep({agent: f"\\boxed{{{move}}}"})
        return result

    assert asyncio.run(play())[1] == {X: 1.0, O: -1.0}


# -- rock-paper-scissors -----------------------------------------------------------------------
def play_rounds(env: MultiAgentEnv, rounds: list[tuple[str, str]]) -> list[MultiStepReturn]:
    return [env.step({P0: f"\\boxed{{{m0}}}", P1: f"\\boxed{{{m1}}}"}) for m0, m1 in rounds]


def test_rock_paper_scissors_won_and_drawn():
    env = make("multiagent:RockPaperScissors-v0")
    obs, _ = env.reset()
    assert "3 rounds" in obs[P0] and "Round 1 of 3" in obs[P1]
    assert env.get_active_agents() == [P0, P1]
    results = play_rounds(env, [("rock", "scissors"), ("rock", "paper"), ("Paper", "rock")])
    assert [r[1] for r in results] == [{P0: 1.0, P1: -1.0}, {P0: -1.0, P1: 1.0}, {P0: 1.0, P1: -1.0}]
    obs, _, term, trunc, infos = results[-1]
    assert term == {P0: True, P1: True} and trunc == {P0: False, P1: False}
    assert infos[P1]["winner"] == P0 and infos[P1]["moves"] == {P0: "paper", P1: "rock"}
    assert "you won" in obs[P0] and "you lost" in obs[P1] and "Score: you 2, your opponent 1" in obs[P0]
    assert "your opponent rock: you win the round" in obs[P0]
    assert env.agents == []

    env.reset()
    assert env._cumulative_rewards == {P0: 0.0, P1: 0.0}
    results = play_rounds(env, [("rock", "rock"), ("paper", "scissors")])
    assert env._cumulative_rewards == {P0: -1.0, P1: 1.0}
    _, rewards, _, _, infos = play_rounds(env, [("scissors", "paper")])[0]
    assert rewards == {P0: 1.0, P1: -1.0} and infos[P0]["winner"] is None


def test_rock_paper_scissors_invalid_moves_lose_the_round_and_both_must_move():
    env = RockPaperScissorsEnv(num_rounds=2)
    env.reset()
    with pytest.raises(ValueError, match="Missing action for active agent"):
        env.step({P0: r"\boxed{rock}"})
    _, rewards, _, _, infos = env.step({P0: "rock!", P1: r"\boxed{lizard} no, \boxed{paper}"})
    assert rewards == {P0: -1.0, P1: 1.0} and infos[P0]["moves"] == {P0: None, P1: "paper"}
    _, rewards, term, _, _ = env.step({P0: "?", P1: "?"})
    assert rewards == {P0: 0.0, P1: 0.0} and term == {P0: True, P1: True}


def test_rock_paper_scissors_seeds_reproduce_and_the_random_variant_draws_its_length():
    env = make("multiagent:RockPaperScissors-v0-random")
    games = {seed: random_game(env, seed) for seed in range(8)}
    assert random_game(env, 5) == games[5]
    assert {(len(game) - 1) // 2 for game in games.values()} > {3}  # some matches are longer
    with pytest.raises(ValueError, match="num_rounds"):
        RockPaperScissorsEnv(num_rounds=0)


# -- compatibility with gem-llm's gem.multiagent -----------------------------------------------
def _without_gem_init() -> types.ModuleType:
    """``gem.multiagent``, imported without running ``gem/__init__.py`` when GEM is not loaded
    yet: that imports every GEM env (reasoning-gym, datasets: seconds), and the multi-agent
    module needs only ``gem.core``. The stand-in package is dropped again afterwards, so a
    later ``import gem`` gets the real one."""
    if "gem" in sys.modules:
        return importlib.import_module("gem.multiagent")
    spec = importlib.util.find_spec("gem")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gem-llm is not installed")
    stand_in = types.ModuleType("gem")
    stand_in.__path__ = list(spec.submodule_search_locations)
    sys.modules["gem"] = stand_in
    try:
        return importlib.import_module("gem.multiagent")
    finally:
        for name in [n for n in sys.modules if n == "gem" or n.startswith("gem.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def gem_ma() -> types.ModuleType:
    return _without_gem_init()


class ProbeRules:
    """The same rules on top of GEM's base and ours: each action pays its length; ``exit``
    terminates its agent, ``quit`` truncates it. It keeps ``self.terminations`` and the rest
    itself (GEM's base requires it) and returns copies (GEM's removal would empty the returned dicts)."""

    selector_class: type

    def __init__(self, mode: str | None = "sequential") -> None:
        super().__init__()  # type: ignore[call-arg]
        self.possible_agents = ["a", "b", "c"]
        self.agent_selector = self.selector_class(self.possible_agents, mode=mode) if mode else None
        self.moves = 0

    def observe(self, agent: str) -> str:
        return f"{agent} after {self.moves} moves"

    def _process_actions(self, actions: dict[str, str]) -> MultiStepReturn:
        self.moves += 1
        for agent, text in actions.items():
            self.terminations[agent] = text == "exit"
            self.truncations[agent] = text == "quit"
            self.infos[agent] = {"echo": text}
        return (
            {agent: self.observe(agent) for agent in actions},
            {agent: float(len(text)) for agent, text in actions.items()},
            dict(self.terminations),
            dict(self.truncations),
            {agent: self.infos[agent] for agent in actions},
        )


@pytest.fixture(scope="module")
def probes(gem_ma: types.ModuleType) -> tuple[type, type]:
    class GemProbe(ProbeRules, gem_ma.MultiAgentEnv):
        selector_class = gem_ma.AgentSelector

    class OurProbe(ProbeRules, MultiAgentEnv):
        selector_class = AgentSelector

    return GemProbe, OurProbe


def _public_surface(cls: type, instance: object) -> set[str]:
    names = {name for klass in cls.__mro__[:-1] for name in vars(klass)} | set(vars(instance))
    return {name for name in names if not name.startswith(("__", "_abc"))}


def test_every_name_of_gems_classes_exists_here(gem_ma, probes):
    gem_probe, our_probe = probes
    gem_names = _public_surface(gem_ma.MultiAgentEnv, gem_probe())
    assert {"step", "_process_actions", "_validate_actions", "agent_selector", "shared_memory"} <= gem_names
    assert not {name for name in gem_names if not hasattr(our_probe(), name)}
    gem_selector_names = _public_surface(gem_ma.AgentSelector, gem_ma.AgentSelector(["a"]))
    assert not {name for name in gem_selector_names if not hasattr(AgentSelector(["a"]), name)}


@pytest.mark.parametrize("cls_name", ["MultiAgentEnv", "AgentSelector"])
def test_gems_methods_take_the_same_arguments_here(gem_ma, cls_name):
    ours = {"MultiAgentEnv": MultiAgentEnv, "AgentSelector": AgentSelector}[cls_name]
    for name, fn in vars(getattr(gem_ma, cls_name)).items():
        if not inspect.isfunction(fn) or name.startswith("__") and name != "__init__":
            continue
        theirs = list(inspect.signature(fn).parameters.values())
        mine = list(inspect.signature(getattr(ours, name)).parameters.values())
        assert [p.name for p in mine[: len(theirs)]] == [p.name for p in theirs] or name == "__init__", name
        extra = mine[len(theirs):]
        assert all(p.default is not p.empty or p.kind is p.VAR_KEYWORD for p in extra), name


def drive_both(probes: tuple[type, type], mode: str | None, script: list[dict[str, str]]) -> None:
    """Play ``script`` on GEM's base and on ours; every return and every piece of state agrees."""
    gem_env, our_env = (probe(mode) for probe in probes)
    assert gem_env.reset() == our_env.reset()
    for actions in script:
        assert gem_env.step(dict(actions)) == our_env.step(dict(actions)), actions
        for name in ("agents", "terminations", "truncations", "infos", "_cumulative_rewards"):
            assert getattr(gem_env, name) == getattr(our_env, name), (name, actions)
        assert gem_env.get_active_states() == our_env.get_active_states()
        if mode:
            assert gem_env.agent_selector.selected == our_env.agent_selector.selected
            assert gem_env.agent_selector.get_active_agents() == our_env.agent_selector.get_active_agents()
    assert gem_env.agents == our_env.agents == []


def test_a_sequential_episode_plays_the_same_on_gems_base(probes):
    script = [{"a": "hi"}, {"b": "exit"}, {"c": "x"}, {"a": "yo"}, {"c": "quit"}, {"a": "ok"}, {"a": "exit"}]
    drive_both(probes, "sequential", script)


@pytest.mark.parametrize("mode", ["parallel", None])
def test_a_parallel_episode_plays_the_same_on_gems_base(probes, mode):
    script = [
        {"a": "1", "b": "22", "c": "333"},
        {"a": "exit", "b": "x", "c": "y"},
        {"b": "quit", "c": "z"},
        {"c": "exit"},
    ]
    drive_both(probes, mode, script)


@pytest.mark.parametrize(
    "mode, actions",
    [
        ("sequential", "go"),
        ("sequential", {}),
        ("sequential", {"b": "go"}),
        ("sequential", {"a": "go", "zed": "go"}),
        ("parallel", {"a": "go", "b": "go"}),
    ],
)
def test_gems_base_and_ours_refuse_the_same_action_dicts(probes, mode, actions):
    for probe in probes:
        env = probe(mode)
        env.reset()
        with pytest.raises(ValueError):
            env.step(actions)


def test_the_selectors_agree(gem_ma):
    theirs, mine = gem_ma.AgentSelector(["a", "b", "c", "d"]), AgentSelector(["a", "b", "c", "d"])

    def ops() -> Iterator[tuple[str, tuple[str, ...]]]:
        yield from [("next", ()), ("next", ()), ("remove_agent", ("c",)), ("next", ()),
                    ("add_agent", ("e",)), ("next", ()), ("remove_agent", ("a",)), ("next", ()),
                    ("next", ()), ("remove_agent", ("e",)), ("next", ()), ("reinit", (["x", "y"],)),
                    ("next", ())]

    for op, args in ops():
        getattr(theirs, op)(*args)
        getattr(mine, op)(*args)
        state = lambda s: (s.selected, s.get_active_agents(), s.is_first(), s.is_last())  # noqa: E731
        assert state(theirs) == state(mine), (op, args)
