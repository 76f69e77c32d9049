"""reasoning-gym's procedural datasets as single-turn envs, GEM's ``rg:<name>`` envs.

What the model sees, how its answer is read and what it earns are GEM's: the observation is the
dataset entry's question verbatim (GEM adds no instruction; a prompt template asks for
``\\boxed{}``), the answer is the content of the action's last ``\\boxed{}``, and the reward is
the dataset's own verifier, ``dataset.score_answer(answer, entry)`` (partial credit in some
datasets). A missing box is scored too, as ``None``, as GEM does.

Problems come from one pool per ``(name, size, dataset_seed)``: the dataset is built on the
first reset that needs it and shared by every env in the process, and each entry is generated
once, since some generators take a second per problem. Which entry an episode gets is drawn
from ``self.rng``, so ``reset(seed=s)`` repeats it.

``seed`` seeds ``self.rng``, as for every env here, not the pool: vector envs give each env its
own ``seed`` (GEM's make_vec does too, where it reseeds the dataset), and a pool per env would
cost a build each (``arc_agi``: about a second and 16 MB). So the same ``seed`` picks another
problem than GEM's, whose ``seed`` builds the pool and whose episodes walk it in order; what
GEM's trainers rely on holds: ``env.seed`` is the seed the env was made with, and envs made
with different seeds draw different problems.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from gem_sandbox_envs.gem_options import refuse_unknown

from gem_sandbox.core import Env, ResetReturn, StepReturn
from gem_sandbox.utils.parsing import last_boxed_answer

if TYPE_CHECKING:
    from reasoning_gym.dataset import ProceduralDataset

TERMINAL_STATE = "<｜TERMINAL_STATE｜>"  # GEM's observation after a single-turn episode
DATASET_SEED = 42  # GEM registers every rg id with seed=42

Entry = dict[str, Any]  # reasoning-gym's: question, answer, metadata


@functools.cache
def shared_dataset(name: str, size: int, seed: int) -> ProceduralDataset:
    """The process's one dataset for these arguments; imports reasoning-gym on first use,
    as the import takes seconds."""
    try:
        import reasoning_gym
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"rg:{name} needs reasoning-gym: pip install 'gem-sandbox[rg]'", name=exc.name
        ) from exc
    return reasoning_gym.create_dataset(name, size=size, seed=seed)


@functools.lru_cache(maxsize=16_384)
def shared_entry(name: str, size: int, seed: int, index: int) -> Entry:
    """Entry ``index`` of :func:`shared_dataset`, generated once (``knight_swap`` and
    ``futoshiki`` take up to seconds each). Envs only read it."""
    return shared_dataset(name, size, seed)[index]


class ReasoningGymEnv(Env[str, str]):
    """One problem of reasoning-gym's ``name`` dataset per episode, scored by its verifier."""

    # Pure Python: called inline from the async face. A first reset imports and builds (up to
    # seconds), and a few generators take a second per entry, each once per process.
    blocking = False

    def __init__(
        self,
        name: str,
        size: int = 500,
        seed: int | None = None,
        dataset_seed: int = DATASET_SEED,
        **gem_options: Any,
    ) -> None:
        refuse_unknown(type(self), gem_options)
        super().__init__(seed)
        self.name = name
        self.size = size
        self.dataset_seed = dataset_seed
        self.entry: Entry | None = None

    @classmethod
    def describe_source(cls, name: str, size: int = 500, dataset_seed: int = DATASET_SEED, **_: Any) -> str:
        return f"procedural: reasoning-gym {name} (size {size}, seed {dataset_seed})"

    @property
    def seed(self) -> int | None:
        """GEM's ``env.seed``: the seed of this env's draws (the constructor's, or the last
        ``reset(seed=)`` or ``spawn(seed=)``'s)."""
        return self._seed

    @property
    def dataset(self) -> ProceduralDataset:
        """The shared dataset, looked up rather than held, so that ``get_state`` and
        ``spawn`` (deep copies) never copy it."""
        return shared_dataset(self.name, self.size, self.dataset_seed)

    def reset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        self.seed_rng(seed)
        index = self.rng.randrange(self.size)
        self.entry = shared_entry(self.name, self.size, self.dataset_seed, index)
        return self.entry["question"], {}

    def step(self, action: str) -> StepReturn:
        """Score the last boxed answer. ``info``: ``status`` (``ok``, ``format_error`` when
        nothing is boxed, ``verifier_error`` when the verifier raised, with ``error``),
        ``score`` (the raw score, the reward) and ``correct`` (a full score)."""
        answer = last_boxed_answer(action)
        info: dict[str, Any] = {"status": "ok" if answer is not None else "format_error"}
        try:
            score = float(self.dataset.score_answer(answer, self.entry))
        except Exception as exc:  # e.g. prime_factorization's int() of a non-number: no credit
            score = 0.0
            info.update(status="verifier_error", error=f"{type(exc).__name__}: {exc}")
        info.update(score=score, correct=score == 1.0)
        return TERMINAL_STATE, score, True, True, info
