"""Evaluate a model on a gem-sandbox env through verifiers' own eval path.

Run: ``python examples/verifiers_eval.py BASE_URL MODEL [ENV_ID]`` against any OpenAI-compatible
server (vLLM, SGLang, ...), with its key in ``OPENAI_API_KEY`` (needs
``pip install 'gem-sandbox[verifiers]'``). verifiers' CLI and trainers (prime-rl) reach the same
environment by module name: ``vf.load_environment("gem_sandbox.integrations.verifiers",
gem_env_id=..., wrappers=...)``.
"""

from __future__ import annotations

import asyncio
import sys

import verifiers as vf


async def main(base_url: str, model: str, env_id: str = "game:GuessTheNumber-v0", num_examples: int = 2) -> list[float]:
    """Roll ``num_examples`` seeds of ``env_id`` out and return each one's reward."""
    env = vf.load_environment("gem_sandbox.integrations.verifiers", gem_env_id=env_id, num_examples=num_examples)
    client = vf.ClientConfig(api_base_url=base_url, api_key_var="OPENAI_API_KEY")
    results = await env.evaluate(client, model, num_examples=num_examples)
    rewards = [output["reward"] for output in results["outputs"]]
    print(f"{env_id} on {model}: rewards {rewards}")
    return rewards


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
