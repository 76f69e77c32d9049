"""Play a gem-sandbox env through SkyRL-gym, the way SkyRL-train's generator does.

Run: ``python examples/skyrl_guess_the_number.py`` (needs ``pip install 'gem-sandbox[skyrl]'``).

To train with SkyRL-train, call ``register()`` in the entry point that starts training (before the
generator makes envs) and name a catalogue id as each dataset row's ``env_class``, with the
row's ``seed`` beside it (``Scorer(env_id).rows(n)`` builds the prompts and seeds). Here a
binary search stands in for the model.
"""

from __future__ import annotations

import re

import skyrl_gym

from gem_sandbox.integrations.skyrl import register

ENV_ID = "game:GuessTheNumber-v0"


def main(seed: int = 0) -> float:
    """One episode: ``make`` with the row's extras, ``init``, then ``step`` until done."""
    register([ENV_ID])
    env = skyrl_gym.make(ENV_ID, env_config={}, extras={"seed": seed, "max_turns": 20})
    chat, _ = env.init([])
    low, high, total, done = 1, 20, 0.0, False
    try:
        while not done:
            hint = re.search(r"guessed (\d+), and the target number is (higher|lower)", chat[-1]["content"])
            if hint:
                low, high = (int(hint[1]) + 1, high) if hint[2] == "higher" else (low, int(hint[1]) - 1)
            action = f"\\boxed{{{(low + high) // 2}}}"
            out = env.step(action)
            chat += [{"role": "assistant", "content": action}, *out["observations"]]
            total += out["reward"]
            done = out["done"]
    finally:
        env.close()
    print(f"{ENV_ID} seed {seed}: {env.turns} turns, reward {total}, metrics {env.get_metrics()}")
    return total


if __name__ == "__main__":
    main()
