"""What every text game shares: GEM's reward constants and the turn loop around one move."""

from __future__ import annotations

import functools
import inspect
from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

from gem_sandbox_envs.gem_options import refuse_unknown

from gem_sandbox.core import Env, ResetReturn, StepReturn
from gem_sandbox.utils.parsing import boxed_answers

Move = TypeVar("Move")

#: What a move leads to: (observation, reward, whether the game is now won or lost).
Outcome = tuple[str, float, bool]


class GameReward:
    """GEM's ``LanguageGameReward``: the rewards every game gives for the common outcomes."""

    SUCCESS = 1.0  # the game is won
    INTERNAL_STEP = 0.0  # a legal move that does not end the game
    FAIL = 0.0  # the game is lost, e.g. a mine is revealed
    INVALID_ACTION = 0.0  # a well-formed but illegal move; it still costs a turn
    FORMAT_ERROR = -0.1  # no parseable move in the action; ends the episode


@functools.cache
def options(cls: type) -> tuple[str, ...]:
    """The keyword arguments ``cls(...)`` takes: its settings and ``seed``."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # after self
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


class _GameType(ABCMeta):
    """Builds a game from its own options and drops the other names GEM's envs know (GEM's
    games take and ignore any keyword): every game keeps an exact signature, with no
    catch-all ``**kwargs`` to hide a typo in, and any other name is refused."""

    def __init__(cls, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        cls.__signature__ = inspect.Signature(params)  # what the game takes, not ``__call__``'s (*args, **kwargs)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        own = options(cls)
        refuse_unknown(cls, kwargs, own)
        return super().__call__(*args, **{k: v for k, v in kwargs.items() if k in own})


class TextGame(Env[str, str], Generic[Move], metaclass=_GameType):
    """A turn-based game played with ``\\boxed{...}`` moves, following GEM's episode rules.

    Every step costs a turn. An action without a parseable move ends the episode with
    :attr:`GameReward.FORMAT_ERROR`; a move that wins or loses ends it (terminated, not
    truncated); otherwise the episode is cut at ``max_turns`` (terminated *and* truncated, as
    GEM reports it) with :meth:`timeout_reward`. Once it ends, a step raises
    :class:`~gem_sandbox.core.ResetNeeded` until the next reset; an action that is not a
    string raises :class:`~gem_sandbox.core.InvalidAction` (an unparseable string is a format
    error, scored). Subclasses implement the game itself: :meth:`new_game`,
    :meth:`parse_move`, :meth:`play` and the texts, and pass their per-episode settings to
    ``TextGame.__init__``: when any is None, every reset draws them anew (GEM's ``-random``
    variants) with :meth:`random_settings`.
    """

    blocking = False

    #: An example move, quoted to the agent when its action cannot be parsed.
    action_format: ClassVar[str]

    #: GEM's ``-random`` settings, one drawn per episode by :meth:`random_settings`: each a
    #: tuple in the order the game passes its settings to ``TextGame.__init__``.
    RANDOM_SETTINGS: ClassVar[Sequence[tuple[Any, ...]]] = ()

    max_turns: int
    turn_count: int

    def __init__(self, seed: int | None, **settings: Any) -> None:
        """``settings`` (the game's per-episode ones, by name) become attributes at each reset."""
        super().__init__(seed)
        self.settings = settings

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        self.seed_rng(seed)
        self.turn_count = 0
        settings = self.settings
        if None in settings.values():
            settings = dict(zip(settings, self.random_settings()))
        vars(self).update(settings)
        self.new_game()
        return self.instructions(), self._info()

    def step(self, action: str) -> StepReturn:
        self.turn_count += 1
        move = self._parse(action)
        if move is None:
            obs = (
                f"At turn {self.turn_count}, you did not provide a valid move. "
                f"Put your move in \\boxed{{}}, for example {self.action_format}."
            )
            out_of_turns = self.turn_count == self.max_turns
            return obs, GameReward.FORMAT_ERROR, True, out_of_turns, self._info()
        obs, reward, ended = self.play(move)
        if ended:
            return obs, reward, True, False, self._info()
        if self.turn_count >= self.max_turns:
            obs = "You have reached the maximum number of turns."
            return obs, self.timeout_reward(move, reward), True, True, self._info()
        return obs, reward, False, False, self._info()

    def _parse(self, action: str) -> Move | None:
        """The last boxed answer that is a move, like GEM's last regex match."""
        for answer in reversed(boxed_answers(action)):
            move = self.parse_move(answer.strip())
            if move is not None:
                return move
        return None

    def _info(self) -> dict[str, Any]:
        # GEM's observation wrappers append ``suffix`` (the current board) to the observation.
        return {"suffix": self.suffix()}

    # -- outcomes of a move, for :meth:`play` ----------------------------------------------
    @staticmethod
    def invalid(obs: str) -> Outcome:
        """A well-formed move that the rules forbid: it earns nothing and the game goes on."""
        return obs, GameReward.INVALID_ACTION, False

    @staticmethod
    def ongoing(obs: str, reward: float = GameReward.INTERNAL_STEP) -> Outcome:
        """A legal move after which the game goes on."""
        return obs, reward, False

    @staticmethod
    def game_over(obs: str, reward: float) -> Outcome:
        """A move that wins or loses the game."""
        return obs, reward, True

    # -- the game ----------------------------------------------------------------------
    def random_settings(self) -> tuple[Any, ...]:
        """This episode's settings when some are left None: one of :attr:`RANDOM_SETTINGS`
        unless the game draws them its own way, as GEM does."""
        return self.rng.choice(self.RANDOM_SETTINGS)

    @abstractmethod
    def new_game(self) -> None:
        """Draw a new episode from ``self.rng``; its settings are already in place."""

    @abstractmethod
    def parse_move(self, answer: str) -> Move | None:
        """The move written in one boxed answer, or None when it is not a move at all."""

    @abstractmethod
    def play(self, move: Move) -> Outcome:
        """Apply ``move``; see :meth:`invalid`, :meth:`ongoing` and :meth:`game_over`."""

    def timeout_reward(self, move: Move, reward: float) -> float:
        """The reward of the last step when the turns run out; some games give partial credit."""
        return reward

    @abstractmethod
    def instructions(self) -> str:
        """The rules, returned by :meth:`reset` as the first observation."""

    @abstractmethod
    def suffix(self) -> str:
        """The current board (if any) and the prompt for the next move."""

    def get_task_suffix(self) -> str:
        """GEM's name for :meth:`suffix`."""
        return self.suffix()
