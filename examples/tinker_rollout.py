"""Roll a group of gem-sandbox episodes out with the Tinker cookbook's own rollout code.

Run: ``python examples/tinker_rollout.py TOKENIZER`` (a Hugging Face model name or a local
tokenizer directory; needs ``pip install 'gem-sandbox[tinker]'``). A binary search stands in
for the model, as a ``TokenCompleter``. To train on Tinker, give the cookbook's RL config
``dataset_builder=GemDatasetBuilder(env_id=..., model_name_for_tokenizer=..., renderer_name=...,
group_size=..., groups_per_batch=...)`` and a ``TinkerTokenCompleter`` does the sampling.
"""

from __future__ import annotations

import re
import sys

from tinker_cookbook import renderers
from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.rollouts import do_group_rollout
from tinker_cookbook.tokenizer_utils import get_tokenizer

import gem_sandbox
from gem_sandbox.integrations.tinker import GemDataset

ENV_ID = "game:GuessTheNumber-v0"


class BinarySearch(TokenCompleter):
    """Reads the hints in the rendered conversation and guesses the middle of what is left."""

    def __init__(self, renderer: renderers.Renderer) -> None:
        self.renderer = renderer

    async def __call__(self, model_input, stop, *, max_tokens=None) -> TokensWithLogprobs:
        low, high = 1, 20
        for guess, way in re.findall(r"guessed (\d+), and the target number is (higher|lower)", self.renderer.tokenizer.decode(model_input.to_ints())):
            low, high = (max(low, int(guess) + 1), high) if way == "higher" else (low, min(high, int(guess) - 1))
        tokens = self.renderer.tokenizer.encode(f" \\boxed{{{(low + high) // 2}}}\n\nUser:", add_special_tokens=False)
        return TokensWithLogprobs(tokens=tokens, maybe_logprobs=None)


async def main(tokenizer: str) -> list[float]:
    """One group of two episodes (two seeds); returns each episode's total reward."""
    gem_sandbox.configure("local")
    renderer = renderers.get_renderer("role_colon", tokenizer=get_tokenizer(tokenizer))
    [group_builder] = GemDataset(ENV_ID, renderer, group_size=2, groups_per_batch=1, n_batches=1).get_batch(0)
    group = await do_group_rollout(group_builder, BinarySearch(renderer))
    rewards = group.get_total_rewards()
    print(f"{ENV_ID} seeds {group_builder.seeds}: rewards {rewards}")
    return rewards


if __name__ == "__main__":
    import asyncio

    asyncio.run(main(sys.argv[1]))
