"""Play one episode of a gem-sandbox env through OpenEnv's generic client.

Start a server, then run this against it::

    gem-sandbox openenv game:GuessTheNumber-v0 --wrappers python_tool --port 8000 &
    python examples/openenv_client.py --url http://127.0.0.1:8000

The "policy" is a binary search that first asks the sandbox for the midpoint with a Python
tool call; a trainer would put its model's completion where ``choose`` is. Needs
``pip install 'gem-sandbox[openenv]'``.
"""

from __future__ import annotations

import argparse
import re

from openenv.core.generic_client import GenericEnvClient

HINT = re.compile(r"you guessed (\d+), and the target number is (higher|lower)")
RANGE = re.compile(r"between (\d+) and (\d+)")


def play(url: str, seed: int = 0, verbose: bool = True) -> float:
    """One episode against the server at ``url``; returns the episode's total reward."""
    with GenericEnvClient(base_url=url).sync() as env:
        result = env.reset(seed=seed)
        low, high = map(int, RANGE.search(result.observation["prompt"]).groups())
        total = 0.0
        # A tool call first: the sandbox computes the first guess.
        result = env.step({"message": f"<python>print(({low} + {high}) // 2)</python>"})
        total += result.reward or 0.0
        guess = int(re.search(r"Code execution result: (\d+)", result.observation["prompt"]).group(1))
        while not result.done:
            result = env.step({"message": rf"My guess is \boxed{{{guess}}}."})
            total += result.reward or 0.0
            if verbose:
                print(f"guess {guess}: reward {result.reward}, {result.observation['prompt'].splitlines()[0]}")
            hint = HINT.search(result.observation["prompt"])
            if hint is not None:
                low, high = (guess + 1, high) if hint.group(2) == "higher" else (low, guess - 1)
                guess = (low + high) // 2
        return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gem-sandbox openenv server")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"episode reward: {play(args.url, args.seed):.2f}")


if __name__ == "__main__":
    main()
