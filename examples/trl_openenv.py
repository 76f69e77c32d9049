"""GRPO with TRL whose rollouts are multi-turn episodes played against ``gem-sandbox openenv``.

TRL's OpenEnv path: ``GRPOTrainer(rollout_func=...)`` hands the rollout function each batch of
prompts; it plays every one as an episode through OpenEnv's client (one WebSocket session per
episode), the model generating each turn and the env's answer (a sandboxed tool result, a
hint) appended as tokens the loss ignores (``env_mask`` 0). The episode's summed reward goes
to the reward function. The model is tiny and untrained (built from a config, its tokenizer
trained here with ``tokenizers``), so this shows the plumbing, not learning. Run::

    gem-sandbox openenv math:Arithmetic-v0 --wrappers python_tool --port 8000 &
    python examples/trl_openenv.py --url http://127.0.0.1:8000 --steps 2

Needs ``pip install 'gem-sandbox[openenv]' trl`` (tested with trl 1.16.0, transformers 5.25.0,
torch 2.14.1, openenv-core 0.3.0), CPU only.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from typing import Any

import torch
from datasets import Dataset
from openenv.core.generic_client import GenericEnvClient
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer

SPECIALS = ["<pad>", "<eos>"]


def opening_prompts(url: str, seeds: list[int]) -> dict[str, int]:
    """Each seed's first observation (the task), mapped back to its seed."""
    prompts: dict[str, int] = {}
    with GenericEnvClient(base_url=url).sync() as env:
        for seed in seeds:
            prompts[env.reset(seed=seed).observation["prompt"]] = seed
    return prompts


def tiny_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the env's own text plus the answer format."""
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    extra = ["<python>print(1 + 1)</python>", r"\boxed{42}", "0123456789"]
    tokenizer.train_from_iterator(
        texts + extra,
        trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>")
    fast.padding_side = "left"
    return fast


def tiny_model(tokenizer: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def make_rollout(url: str, seeds: dict[str, int], max_turns: int, max_new_tokens: int) -> Callable[..., dict[str, Any]]:
    """TRL's ``rollout_func(prompts, trainer)``: one episode per prompt, up to ``max_turns``."""

    def rollout(prompts: list[str], trainer: GRPOTrainer) -> dict[str, Any]:
        tokenizer, model = trainer.processing_class, trainer.model
        out: dict[str, list[Any]] = {key: [] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "turns")}
        for prompt in prompts:
            prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            completion, logprobs, mask, total, turns = [], [], [], 0.0, 0
            with GenericEnvClient(base_url=url).sync() as env:
                result = env.reset(seed=seeds[prompt])
                while not result.done and turns < max_turns:
                    ids, lps = generate(model, tokenizer, prompt_ids + completion, max_new_tokens)
                    completion, logprobs, mask = completion + ids, logprobs + lps, mask + [1] * len(ids)
                    result = env.step({"message": tokenizer.decode(ids, skip_special_tokens=True)})
                    total, turns = total + (result.reward or 0.0), turns + 1
                    if not result.done:  # the env's answer, in context for the next turn, out of the loss
                        feedback = tokenizer(result.observation["prompt"], add_special_tokens=False)["input_ids"]
                        completion, logprobs, mask = completion + feedback, logprobs + [0.0] * len(feedback), mask + [0] * len(feedback)
            for key, value in zip(out, (prompt_ids, completion, logprobs, mask, total, turns)):
                out[key].append(value)
        return out

    return rollout


@torch.no_grad()
def generate(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, context: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
    """Sample one turn; the sampled tokens and their log-probabilities."""
    inputs = torch.tensor([context], device=model.device)
    output = model.generate(
        inputs,
        attention_mask=torch.ones_like(inputs),
        max_new_tokens=max_new_tokens,
        do_sample=True,
        pad_token_id=tokenizer.pad_token_id,
        output_scores=True,
        return_dict_in_generate=True,
    )
    ids = output.sequences[0, inputs.shape[1] :].tolist()
    logps = [torch.log_softmax(score[0], dim=-1)[token].item() for score, token in zip(output.scores, ids)]
    return ids, logps


def env_reward(completions: list[Any], env_reward: list[float], **_: Any) -> list[float]:
    """The reward the env paid over the episode (the rollout forwards it)."""
    return [float(r) for r in env_reward]


def train(url: str, steps: int = 2, episodes: int = 4, generations: int = 2, max_turns: int = 3, max_new_tokens: int = 16) -> list[dict[str, float]]:
    """``steps`` GRPO steps; returns the trainer's log history."""
    seeds = opening_prompts(url, list(range(episodes)))
    tokenizer = tiny_tokenizer(list(seeds))
    model = tiny_model(tokenizer)
    with tempfile.TemporaryDirectory() as output_dir:
        config = GRPOConfig(
            output_dir=output_dir,
            max_steps=steps,
            per_device_train_batch_size=generations * 2,
            num_generations=generations,
            max_completion_length=max_turns * (max_new_tokens + 256),
            learning_rate=1e-3,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            dataloader_num_workers=0,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=env_reward,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": list(seeds)}),
            processing_class=tokenizer,
            rollout_func=make_rollout(url, seeds, max_turns, max_new_tokens),
        )
        trainer.train()
        return trainer.state.log_history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gem-sandbox openenv server")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=4, help="distinct tasks (seeds) in the dataset")
    args = parser.parse_args()
    for record in train(args.url, args.steps, args.episodes):
        print(record)


if __name__ == "__main__":
    main()
