"""GRPO with TRL on a CPU, every reward from a program run in a sandbox.

Run (in a venv with torch, transformers, trl and datasets beside gem-sandbox; bubblewrap
installed)::

    python examples/train_trl_grpo.py --steps 3

TRL's ``GRPOTrainer`` trains a tiny causal LM (a two-layer Qwen2 built from a config: no
weights are downloaded) with two reward functions from
:mod:`gem_sandbox.integrations.trl`: the shipped stdin/stdout code sample
(``code:CodeContest`` with ``sample=True``, ``reward="fraction"``: each test a sandbox run) and
a ``python_tool``-wrapped arithmetic env (the completion's code block runs in a sandbox; GEM's
tool rewards). Both run on one local (bubblewrap) runtime.

A random model writes no Python, so the tokenizer is made to let it: a word-level tokenizer,
trained here with ``tokenizers`` on the code sample's task titles and a handful of short
programs, whose tokens are whole lines (``"```python\\n"``, ``"print(input())\\n"``, a
title). A prompt is its title and unknown lines; a sampled completion is a sequence of lines,
often a fenced program, some of which pass some tests or run as a tool call, so rewards
differ within a group and GRPO has a gradient. Nothing else steers the sampling.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.integrations.trl import RewardFunction, dataset, python_tool_reward, reward_function
from gem_sandbox.sync import SyncRuntime

CODE_ENV = "code:CodeContest"  # with sample=True: the stdin/stdout sample shipped with the package
TOOL_ENV = "math:Arithmetic-v0"
# Short programs in the tokenizer's corpus: their lines become tokens. Each one passes some
# of some sample task's tests (print(input()) echoes "single" back; print(0) counts no primes
# below 2), none solves a task outright.
PROGRAMS = [
    "a, b = map(int, input().split())\nprint(a - b)\n",
    "print(input())\n",
    "print(0)\n",
    "n = int(input())\nprint(n)\n",
    "print(1)\n",
    "print(input()[::-1])\n",
]
SPECIAL = ["<unk>", "<pad>", "<eos>"]


@dataclass
class Run:
    """What a training run did: per-step logs and timings, the reward functions (whose
    ``history`` holds each call's scored completions), and whether the weights moved."""

    steps: int
    seconds: float
    log_history: list[dict[str, Any]]
    reward_funcs: list[RewardFunction]
    weights_changed: bool
    sandbox_leases: int
    step_seconds: list[float] = field(default_factory=list)

    def rewards_per_step(self) -> list[dict[str, float | None]]:
        keys = [f"rewards/{f.__name__}/mean" for f in self.reward_funcs]
        return [{k: e[k] for k in keys if k in e} for e in self.log_history if "loss" in e]


def line_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose tokens are lines (newline kept), from ``texts``."""
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("\n", behavior="merged_with_previous")
    tokenizer.decoder = decoders.Fuse()  # lines are joined as they are, no spaces between
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=SPECIAL, min_frequency=1))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<eos>",
        clean_up_tokenization_spaces=False,
    )


def tiny_model(vocab_size: int, tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return Qwen2ForCausalLM(config)


class StepClock(TrainerCallback):
    """Seconds per optimizer step."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.seconds.append(time.perf_counter() - self._start)


def train(steps: int = 3, *, seed: int = 0, output_dir: str | None = None, runtime: SyncRuntime | None = None) -> Run:
    """Train for ``steps`` GRPO steps; sandboxes come from ``runtime`` (default: a local one)."""
    own = runtime is None
    runtime = runtime or SyncRuntime("local", max_size=4).__enter__()
    started = time.perf_counter()
    try:
        code = Scorer(CODE_ENV, runtime=runtime, sample=True, reward="fraction", timeout=2.0)
        code_reward = reward_function(code)
        tool_reward = python_tool_reward(TOOL_ENV, runtime=runtime)
        train_set = dataset([code, tool_reward.scorer], 8, seed=seed)  # type: ignore[attr-defined]
        titles = sorted({row["prompt"].split("\n", 1)[0] + "\n" for row in code.rows(8, seed)})
        tokenizer = line_tokenizer(titles + ["```python\n" + p + "```\n" for p in PROGRAMS])
        torch.manual_seed(seed)
        model = tiny_model(len(tokenizer), tokenizer)
        before = {k: v.detach().clone() for k, v in model.state_dict().items()}
        clock = StepClock()
        with tempfile.TemporaryDirectory() as scratch:
            config = GRPOConfig(
                output_dir=output_dir or scratch,
                max_steps=steps,
                per_device_train_batch_size=16,
                num_generations=4,
                max_completion_length=16,
                temperature=1.0,
                learning_rate=3e-2,
                beta=0.0,
                logging_steps=1,
                save_strategy="no",
                report_to=[],
                use_cpu=True,
                seed=seed,
                dataloader_num_workers=0,
            )
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=[code_reward, tool_reward],
                args=config,
                train_dataset=train_set,
                processing_class=tokenizer,
                callbacks=[clock],
            )
            trainer.train()
        changed = any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
        return Run(
            steps=trainer.state.global_step,
            seconds=time.perf_counter() - started,
            log_history=list(trainer.state.log_history),
            reward_funcs=[code_reward, tool_reward],
            weights_changed=changed,
            sandbox_leases=runtime.statistics().leases,
            step_seconds=clock.seconds,
        )
    finally:
        if own:
            runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run = train(args.steps, seed=args.seed)
    summary = {
        "steps": run.steps,
        "seconds": round(run.seconds, 1),
        "seconds_per_step": [round(s, 2) for s in run.step_seconds],
        "rewards_per_step": run.rewards_per_step(),  # None: no row of that env in the step
        "weights_changed": run.weights_changed,
        "sandbox_leases": run.sandbox_leases,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
