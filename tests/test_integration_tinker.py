"""The Tinker adapter through the Tinker cookbook's own rollout code (tinker-cookbook 0.5.8: pip picks it because 0.6.1 needs tml-renderers>=0.4.1, which does not resolve here).

Tinker's service cannot be reached from here, so the model is a ``TokenCompleter`` (the
cookbook's policy interface) that answers with a scripted policy; everything else is the
cookbook's: ``do_group_rollout`` builds the group, rolls each env out and calls ``cleanup``;
the ``role_colon`` renderer renders and parses. Its tokenizer is a byte-level BPE trained
here on a few sentences (no model can be downloaded), loaded through the cookbook's
``get_tokenizer`` from a local directory.
"""

from __future__ import annotations

import pickle
import runpy
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

pytest.importorskip("tinker_cookbook", reason="needs tinker-cookbook: pip install 'gem-sandbox[tinker]'")

import tinker  # noqa: E402
from tinker_cookbook import renderers  # noqa: E402
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs  # noqa: E402
from tinker_cookbook.rl.rollouts import do_group_rollout  # noqa: E402
from tinker_cookbook.tokenizer_utils import get_tokenizer  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

import gem_sandbox  # noqa: E402
from gem_sandbox.integrations.tinker import (  # noqa: E402
    GemDataset,
    GemDatasetBuilder,
    GemEnvGroupBuilder,
)
from tests.trainer_policies import GAME_ID, MATH_ID, MATH_SEED, Guesser, math_with_tool  # noqa: E402

EXAMPLE = Path(__file__).parent.parent / "examples" / "tinker_rollout.py"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    corpus = ["User: guess the number\n\nAssistant: \\boxed{10}\n\n", "Code execution result: 42 <python>print(1)</python>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    path = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>").save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def renderer(tokenizer_dir: str) -> renderers.Renderer:
    return renderers.get_renderer("role_colon", tokenizer=get_tokenizer(tokenizer_dir))


@pytest.fixture(scope="module", autouse=True)
def local_sandboxes():
    gem_sandbox.configure("local")
    yield
    gem_sandbox.configure(None)


class ScriptedCompleter(TokenCompleter):
    """The cookbook's policy interface; a fresh ``policy`` per conversation (keyed by its
    first user message) reads the latest user message and answers it."""

    def __init__(self, renderer: renderers.Renderer, make_policy: Callable[[], Callable[[str], str]]) -> None:
        self.renderer, self.make_policy = renderer, make_policy
        self.policies: dict[str, Callable[[str], str]] = {}

    async def __call__(self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None) -> TokensWithLogprobs:
        assert stop == ["\n\nUser:"]
        text = self.renderer.tokenizer.decode(model_input.to_ints())
        turns = text.split("User: ")
        policy = self.policies.setdefault(turns[1], self.make_policy())
        reply = policy(turns[-1].split("\n\nAssistant:")[0])
        tokens = self.renderer.tokenizer.encode(f" {reply}\n\nUser:", add_special_tokens=False)
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=[0.0] * len(tokens))


def _rollout(builder: GemEnvGroupBuilder, completer: TokenCompleter):
    return anyio.run(do_group_rollout, builder, completer)


def test_a_group_of_games_is_won_through_the_cookbooks_rollout(renderer):
    [builder] = GemDataset(GAME_ID, renderer, group_size=3, groups_per_batch=1, n_batches=1, seed=20).get_batch(0)
    group = _rollout(builder, ScriptedCompleter(renderer, Guesser))
    assert group.get_total_rewards() == [1.0, 1.0, 1.0]
    assert all(t.transitions[-1].episode_done for t in group.trajectories_G)
    assert builder._made == []  # cleanup closed every env


def test_each_env_of_a_group_gets_its_own_seed_and_batches_never_repeat_one(renderer):
    dataset = GemDataset(GAME_ID, renderer, group_size=4, groups_per_batch=2, n_batches=3, seed=5)
    seeds = [s for i in range(len(dataset)) for b in dataset.get_batch(i) for s in b.seeds]
    assert len(seeds) == len(set(seeds)) == 24 and min(seeds) == 5
    same = GemDataset(GAME_ID, renderer, group_size=4, groups_per_batch=2, n_batches=1, same_task=True)
    assert [b.seeds for b in same.get_batch(0)] == [(0, 0, 0, 0), (1, 1, 1, 1)]


def test_a_python_tool_episode_scores_the_number_its_sandbox_printed(renderer):
    builder = GemEnvGroupBuilder(MATH_ID, (MATH_SEED,), renderer, wrappers="python_tool")
    group = _rollout(builder, ScriptedCompleter(renderer, lambda: math_with_tool))
    [trajectory] = group.trajectories_G
    assert len(trajectory.transitions) == 2
    assert trajectory.transitions[0].metrics["tool_success_counter"] == 1.0
    assert trajectory.transitions[1].metrics["correct"] == 1.0
    assert group.get_total_rewards()[0] > 1.0  # the answer's 1 and the tool's shaping reward


def test_a_cut_off_response_reaches_the_env_as_empty_text(renderer):
    class CutOff(TokenCompleter):
        async def __call__(self, model_input, stop, *, max_tokens=None):
            tokens = renderer.tokenizer.encode(" \\boxed{10} and then", add_special_tokens=False)
            return TokensWithLogprobs(tokens=tokens, maybe_logprobs=None, stop_reason="length")

    group = _rollout(GemEnvGroupBuilder(GAME_ID, (1,), renderer), CutOff())
    [trajectory] = group.trajectories_G
    assert len(trajectory.transitions) == 1 and trajectory.transitions[0].reward < 0  # GEM's format penalty


def test_builders_pickle_for_distributed_rollouts(renderer):
    [builder] = GemDataset(GAME_ID, renderer, group_size=2, groups_per_batch=1, n_batches=1).get_batch(0)
    copy = pickle.loads(pickle.dumps(builder))
    assert copy.seeds == builder.seeds and copy.env_id == GAME_ID


def test_the_dataset_builder_loads_its_tokenizer_and_renderer(tokenizer_dir):
    builder = GemDatasetBuilder(
        env_id=GAME_ID, model_name_for_tokenizer=tokenizer_dir, renderer_name="role_colon",
        group_size=2, groups_per_batch=3, n_batches=4, env_kwargs_json='{"max_turns": 5}',
    )
    train, test = anyio.run(builder)
    assert test is None and len(train) == 4 and len(train.get_batch(3)) == 3
    assert train.get_batch(0)[0].env_kwargs == {"max_turns": 5}


@pytest.mark.parametrize("env_id, wrappers, error", [("game:NoSuchGame-v0", "", ValueError), (GAME_ID, "python_tol", KeyError)])
def test_an_unknown_env_or_wrapper_fails_when_the_dataset_is_built(renderer, env_id, wrappers, error):
    with pytest.raises(error, match=env_id if error is ValueError else wrappers):
        GemDataset(env_id, renderer, group_size=1, groups_per_batch=1, n_batches=1, wrappers=wrappers)


def test_the_example_runs(tokenizer_dir):
    example = runpy.run_path(str(EXAMPLE))
    assert anyio.run(example["main"], tokenizer_dir) == [1.0, 1.0]
