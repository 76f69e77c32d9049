"""GEM's multi-agent environment: :class:`MultiAgentEnv` and its turn order, :class:`AgentSelector`.

Several agents share one episode. ``reset`` returns ``(observations, infos)`` and ``step(actions)``
returns ``(observations, rewards, terminations, truncations, infos)``, every one a dict keyed by
agent id, as in ``gem.multiagent``. ``actions`` holds one text per agent whose turn it is: the
selected agent in ``"sequential"`` mode, every remaining agent in ``"parallel"`` mode (or with no
selector). An agent that terminates or is truncated leaves ``agents`` after the step that ended it
(that step's dicts still report it); the episode is over when no agent is left.

A subclass sets ``possible_agents`` (and usually ``agent_selector``) in ``__init__`` and
implements :meth:`MultiAgentEnv.observe` and :meth:`MultiAgentEnv._process_actions` (or
:meth:`MultiAgentEnv._aprocess_actions` when its moves wait on I/O); it draws each episode in
:meth:`MultiAgentEnv.new_episode`, or overrides ``reset`` and calls ``super().reset()``, GEM's way.

The lifecycle is the project's (:mod:`gem_sandbox.core`): a step before ``reset`` or once every
agent is done raises :class:`~gem_sandbox.core.ResetNeeded`. A malformed action dict raises
:class:`InvalidActions`, both GEM's ``ValueError`` and the project's ``InvalidAction``.
"""

from __future__ import annotations

import functools
import reprlib
from collections.abc import Callable
from typing import Any, ClassVar, Literal, overload

from gem_sandbox.bridge import run_sync
from gem_sandbox.core import Env, InvalidAction, ResetNeeded
from gem_sandbox.guards import guard_areset, guard_reset

#: ``(observations, rewards, terminations, truncations, infos)``, each keyed by agent id.
MultiStepReturn = tuple[
    dict[str, str],
    dict[str, float],
    dict[str, bool],
    dict[str, bool],
    dict[str, dict[str, Any]],
]
#: One agent's ``(observation, cumulative reward, terminated, truncated, info)`` (GEM's ``get_state``).
AgentState = tuple[str, float, bool, bool, dict[str, Any]]

SEQUENTIAL = "sequential"  # one agent acts per step, in turn
PARALLEL = "parallel"  # every remaining agent acts in every step
SelectorMode = Literal["sequential", "parallel"]


class InvalidActions(InvalidAction, ValueError):
    """An action dict the env cannot take: not a dict of strings, or not keyed by exactly the
    agents whose turn it is. GEM raises ``ValueError`` here, the project ``InvalidAction`` for
    a non-text action: this is both, so either ``except`` catches it."""


class AgentSelector:
    """Whose turn it is: GEM's ``AgentSelector``.

    In ``"sequential"`` mode the agents act one at a time, in list order, wrapping around;
    ``selected`` is the one to act and :meth:`next` passes the turn on. In ``"parallel"`` mode
    every agent acts at once and :meth:`next` changes nothing.
    """

    def __init__(self, agents: list[str], mode: SelectorMode = "sequential") -> None:
        if mode not in (SEQUENTIAL, PARALLEL):
            # GEM only notices at the first get_active_agents(); a typo should fail here.
            raise ValueError(f"Unknown mode: {mode!r} (modes are {SEQUENTIAL!r} and {PARALLEL!r})")
        self.mode: SelectorMode = mode
        self._agents: list[str] = []
        self._current_idx = 0
        self.selected: str | None = None
        self.reinit(agents)

    def get_active_agents(self) -> list[str]:
        """The agents that act in the next step."""
        if self.mode == SEQUENTIAL:
            return [self.selected] if self.selected is not None else []
        return list(self._agents)

    def next(self) -> None:
        """Pass the turn to the next agent (sequential mode only)."""
        if self.mode == SEQUENTIAL and self._agents:
            self._current_idx = (self._current_idx + 1) % len(self._agents)
            self.selected = self._agents[self._current_idx]

    def is_first(self) -> bool:
        return self._current_idx == 0

    def is_last(self) -> bool:
        return self._current_idx == len(self._agents) - 1

    def reinit(self, agents: list[str]) -> None:
        """Start over with ``agents``, the first of them to act."""
        self._agents = list(agents)
        self._current_idx = 0
        self.selected = self._agents[0] if self._agents else None

    def add_agent(self, agent: str) -> None:
        """Append ``agent`` to the turn order (it acts last in the round)."""
        if agent in self._agents:
            return
        self._agents.append(agent)
        if self.selected is None:  # GEM leaves an emptied selector stuck on None
            self._current_idx, self.selected = len(self._agents) - 1, agent

    def remove_agent(self, agent: str) -> None:
        """Drop ``agent`` from the turn order.

        When it is the selected agent, the selection moves back to its predecessor, so that the
        :meth:`next` which follows a step lands on its successor (GEM's convention; GEM fails to
        wrap around when the first agent leaves, and skips the second).
        """
        if agent not in self._agents:
            return
        idx = self._agents.index(agent)
        self._agents.remove(agent)
        if not self._agents:
            self._current_idx, self.selected = 0, None
            return
        if idx < self._current_idx:
            self._current_idx -= 1
        elif idx == self._current_idx:
            # In parallel mode no next() follows and the selection only has to stay in range.
            wrap = self.mode == SEQUENTIAL
            self._current_idx = (idx - 1) % len(self._agents) if wrap else max(0, idx - 1)
        self.selected = self._agents[self._current_idx]

    def __repr__(self) -> str:
        return f"AgentSelector({self._agents!r}, mode={self.mode!r}, selected={self.selected!r})"


# The guards of a multi-agent env's step/astep (installed through ``Env._guards``, the hook
# ``Env.__init_subclass__`` reads; reset and areset keep the core's): the core's step guards treat a dict action as a type
# error and a returned non-empty terminations dict as the episode's end. Here the episode ends
# when no agent is left, and :meth:`MultiAgentEnv.check_step` checks the action dict. Writes are
# idempotent, as in the core, so a subclass's step that calls ``super().step()`` counts one turn.
def _guard_step(fn: Callable[..., MultiStepReturn]) -> Callable[..., MultiStepReturn]:
    @functools.wraps(fn)
    def step(self: MultiAgentEnv, actions: Any) -> MultiStepReturn:
        turn = self.check_step(actions)
        result = fn(self, actions)
        self._turn, self._done = turn + 1, not self.agents
        return result

    return step


def _guard_astep(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def astep(self: MultiAgentEnv, actions: Any) -> MultiStepReturn:
        turn = self.check_step(actions)
        result = await fn(self, actions)
        self._turn, self._done = turn + 1, not self.agents
        return result

    return astep


class MultiAgentEnv(Env[dict[str, str], dict[str, str]]):
    """Base class of multi-agent environments, with ``gem.multiagent.MultiAgentEnv``'s attributes
    and methods.

    State, per episode: ``agents`` (those still playing, a sublist of ``possible_agents``),
    ``terminations``, ``truncations``, ``rewards`` (the last step's), ``infos`` and
    ``_cumulative_rewards``, each keyed by the agents still playing; ``shared_memory`` (the
    messages agents sent each other) and ``global_context`` (free text every agent may see).
    ``agent_selector`` decides whose turn it is; without one every agent acts in every step.

    Randomness comes from ``self.rng`` (reseeded by ``reset(seed=...)``), as in every env here.
    """

    _guards: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "reset": guard_reset,
        "areset": guard_areset,
        "step": _guard_step,
        "astep": _guard_astep,
    }

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(seed)
        self.possible_agents: list[str] = []
        self.agents: list[str] = []
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.rewards: dict[str, float] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.agent_selector: AgentSelector | None = None
        self.shared_memory: list[dict[str, str]] = []
        self.global_context: str = ""
        self._was_selected = False  # whether the agent _drop_agent last dropped was to move

    # -- the episode -------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """Start an episode with every possible agent: ``(observations, infos)`` keyed by agent.

        ``kwargs`` are accepted for the project's signature and ignored, as by the games.
        """
        self.seed_rng(seed)
        self.agents = list(self.possible_agents)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.infos = {agent: {} for agent in self.agents}
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.shared_memory = []
        self.global_context = ""
        if self.agent_selector is not None:
            self.agent_selector.reinit(self.agents)
        self.new_episode()
        observations = {agent: self.observe(agent) for agent in self.agents}
        return observations, {agent: dict(self.infos[agent]) for agent in self.agents}

    def new_episode(self) -> None:
        """Draw the env's own state for a new episode from ``self.rng``; ``reset`` calls it after
        the bookkeeping above and before the first observations. (Not in GEM, whose subclasses
        override ``reset`` instead; both work.)"""

    def step(self, actions: dict[str, str]) -> MultiStepReturn:  # type: ignore[override]
        """Apply one text action per active agent; five dicts keyed by agent id come back."""
        self._validate_actions(actions, self.get_active_agents())
        return self._finish_step(self._process_actions(actions))

    async def astep(self, actions: dict[str, str]) -> MultiStepReturn:  # type: ignore[override]
        """:meth:`step`'s async face: awaits :meth:`_aprocess_actions`."""
        self._validate_actions(actions, self.get_active_agents())
        return self._finish_step(await self._aprocess_actions(actions))

    def check_step(self, action: object) -> int:
        """The turns played so far; raises :class:`ResetNeeded` with no episode running (before
        ``reset``, or once every agent is done) and :class:`InvalidActions` unless ``action``
        is a dict of texts. The step guards call it; which agents must act is checked by
        :meth:`_validate_actions`."""
        turn = self._turn
        if turn is None:
            raise ResetNeeded(f"{type(self).__name__} has no episode running: call reset() first")
        if self._done or not self.agents:
            raise ResetNeeded(
                f"{type(self).__name__}'s episode ended at turn {turn} (every agent is done); "
                "call reset() to start a new one"
            )
        if not isinstance(action, dict):
            raise InvalidActions(f"Actions must be a dict, got {type(action)}")
        for agent, text in action.items():
            if not isinstance(text, str):
                raise InvalidActions(
                    f"actions are strings (the model's text); agent {agent!r} sent "
                    f"{type(text).__name__} {reprlib.repr(text)}"
                )
        return turn

    def _validate_actions(self, actions: dict[str, str], active_agents: list[str]) -> None:
        """Raise :class:`InvalidActions` unless every active agent still playing has an action
        and no other agent has one."""
        missing = [
            agent
            for agent in active_agents
            if not self.terminations.get(agent, True)
            and not self.truncations.get(agent, True)
            and agent not in actions
        ]
        if missing:
            raise InvalidActions(f"Missing action for active agent(s) {', '.join(missing)}")
        for agent in actions:
            if agent in active_agents:
                continue
            if agent not in self.agents and agent not in self.possible_agents:
                raise InvalidActions(f"Agent {agent!r} provided action but is not in the environment")
            if agent not in self.agents:
                raise InvalidActions(f"Agent {agent!r} provided action but is done")
            raise InvalidActions(
                f"Agent {agent!r} provided action but is not active "
                f"(active: {', '.join(active_agents) or 'none'})"
            )

    def _process_actions(self, actions: dict[str, str]) -> MultiStepReturn:
        """Apply validated ``actions`` and return the step's five dicts. An agent is done when
        its termination or truncation is True (set in ``self.terminations`` or returned).

        Implement this or :meth:`_aprocess_actions`; either gets the other for free."""
        if type(self)._aprocess_actions is not MultiAgentEnv._aprocess_actions:
            return run_sync(self._aprocess_actions, actions)
        raise NotImplementedError(f"{type(self).__name__} implements neither _process_actions nor _aprocess_actions")

    async def _aprocess_actions(self, actions: dict[str, str]) -> MultiStepReturn:
        """:meth:`_process_actions`'s async face, for envs whose moves wait on I/O."""
        if type(self)._process_actions is MultiAgentEnv._process_actions:
            raise NotImplementedError(
                f"{type(self).__name__} implements neither _process_actions nor _aprocess_actions"
            )
        return await self._call_sync(self._process_actions, actions)

    def _finish_step(self, result: MultiStepReturn) -> MultiStepReturn:
        """GEM's bookkeeping after a step: record it, add up the rewards, drop the agents that
        are done and pass the turn on.

        The returned dicts are copies, so that an agent dropped here is still reported in them
        (GEM returns ``self.terminations`` itself, which loses the agent it just removed).
        """
        observations, rewards, terminations, truncations, infos = (dict(part) for part in result)
        for agent in self.agents:
            if agent in terminations:
                self.terminations[agent] = bool(terminations[agent])
            if agent in truncations:
                self.truncations[agent] = bool(truncations[agent])
            if agent in infos:
                self.infos[agent] = infos[agent]
            if agent in rewards:
                self.rewards[agent] = float(rewards[agent])
                self._cumulative_rewards[agent] = self._cumulative_rewards.get(agent, 0.0) + float(rewards[agent])
        self._remove_dead_agents()
        if self.agent_selector is not None:
            self.agent_selector.next()
        return observations, rewards, terminations, truncations, infos

    @property
    def suspends(self) -> bool:
        """Whether the async face can suspend: only when ``blocking`` or async-native."""
        cls = type(self)
        return (
            self.blocking
            or cls._aprocess_actions is not MultiAgentEnv._aprocess_actions
            or cls.astep is not MultiAgentEnv.astep
            or cls.areset is not Env.areset
        )

    # -- agents ------------------------------------------------------------------------
    def observe(self, agent: str) -> str:
        """What ``agent`` sees now."""
        raise NotImplementedError(f"{type(self).__name__} does not implement observe")

    def get_active_agents(self) -> list[str]:
        """The agents whose actions the next step takes (the selector's, else every agent)."""
        if self.agent_selector is not None:
            return self.agent_selector.get_active_agents()
        return list(self.agents)

    @overload
    def get_state(self) -> dict[str, Any]: ...

    @overload
    def get_state(self, agent: str) -> AgentState: ...

    def get_state(self, agent: str | None = None) -> dict[str, Any] | AgentState:
        """GEM's ``get_state(agent)``: that agent's ``(observation, cumulative reward,
        terminated, truncated, info)``. Without an agent, the project's snapshot of the whole
        env for :meth:`set_state`."""
        if agent is None:
            return super().get_state()
        if agent not in self.agents:
            raise ValueError(f"Agent {agent} not in environment")
        return (
            self.observe(agent),
            self._cumulative_rewards.get(agent, 0.0),
            self.terminations.get(agent, False),
            self.truncations.get(agent, False),
            self.infos.get(agent, {}),
        )

    def get_active_states(self) -> dict[str, AgentState]:
        """:meth:`get_state` of every active agent still playing."""
        return {agent: self.get_state(agent) for agent in self.get_active_agents() if agent in self.agents}

    def add_agent(self, agent_id: str) -> None:
        """Let ``agent_id`` join the episode (last in the turn order)."""
        if agent_id in self.agents:
            return
        self.agents.append(agent_id)
        self.terminations[agent_id] = False
        self.truncations[agent_id] = False
        self.rewards[agent_id] = 0.0
        self.infos[agent_id] = {}
        self._cumulative_rewards[agent_id] = 0.0
        if self.agent_selector is not None:
            self.agent_selector.add_agent(agent_id)

    def remove_agent(self, agent_id: str) -> None:
        """Take ``agent_id`` out of the episode, its entries with it. When it was the one to
        move, its successor moves next (GEM would give the turn back to its predecessor)."""
        self._drop_agent(agent_id)
        selector = self.agent_selector
        if selector is not None and selector.selected is not None and self._was_selected:
            selector.next()

    def _remove_dead_agents(self) -> None:
        """Drop the agents that are done, within a step: the selector's :meth:`AgentSelector.next`
        that follows passes the turn on (GEM's protocol)."""
        for agent in [a for a in self.agents if self.terminations.get(a, False) or self.truncations.get(a, False)]:
            self._drop_agent(agent)

    def _drop_agent(self, agent_id: str) -> None:
        self._was_selected = False
        if agent_id not in self.agents:
            return
        self.agents.remove(agent_id)
        for table in (self.terminations, self.truncations, self.rewards, self.infos, self._cumulative_rewards):
            table.pop(agent_id, None)
        if self.agent_selector is not None:
            self._was_selected = self.agent_selector.selected == agent_id
            self.agent_selector.remove_agent(agent_id)

    # -- messages ----------------------------------------------------------------------
    def send_message(self, from_agent: str, to_agent: str, message: str) -> None:
        """Record ``message`` from one agent to another in ``shared_memory``."""
        if from_agent not in self.agents:
            raise ValueError(f"Sender {from_agent} not in environment")
        if to_agent not in self.agents:
            raise ValueError(f"Receiver {to_agent} not in environment")
        self.shared_memory.append({"from": from_agent, "to": to_agent, "message": message})

    def broadcast_message(self, from_agent: str, message: str) -> None:
        """Record ``message`` from ``from_agent`` to every other agent still playing."""
        if from_agent not in self.agents:
            raise ValueError(f"Sender {from_agent} not in environment")
        for agent in self.agents:
            if agent != from_agent:
                self.shared_memory.append({"from": from_agent, "to": agent, "message": message})

    # -- helpers -----------------------------------------------------------------------
    def sample_random_action(self) -> dict[str, str]:
        """A random action dict for the next step: :meth:`sample_agent_action` of each active
        agent still playing."""
        return {agent: self.sample_agent_action(agent) for agent in self.get_active_agents() if agent in self.agents}

    def sample_agent_action(self, agent: str) -> str:
        """A random well-formed action of ``agent``'s, drawn from ``self.rng``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample_agent_action")
