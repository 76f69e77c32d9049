"""ROLL, Oat, RL2 and GEM's own training examples drive GEM's API (``gem.make``, GEM's wrapper
factory, ``reset``/``step``). They move to gem-sandbox by changing one import line, as below:
every tool call then runs in a pooled sandbox instead of a host subprocess.

Code that must keep ``import gem`` (gem-llm installed, e.g. a pinned trainer) can instead route
GEM's own ``run_python`` into sandboxes with ``gem_sandbox.integrations.gem.install()`` (see
``main(keep_gem=True)``).

Run: ``python examples/gem_drop_in.py`` (bubblewrap installed; no Docker needed).
"""

from __future__ import annotations

import re

import gem_sandbox as gem  # was: import gem
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns  # was: gem.wrappers.wrapper_factory


def solve_with_python(env_id: str = "math:Arithmetic-v0", seed: int = 3) -> float:
    """One episode of a ROLL-style env manager: make, wrap with GEM's names, reset, step.

    A scripted policy stands in for the model (for seed 3's task, a modular power): it asks
    the Python tool to compute the answer, then boxes what the tool printed. Returns the
    episode's total reward."""
    env = gem.make(env_id)
    for wrap in get_wrapper_fns("python_tool", tokenizer=None):
        env = wrap(env)
    try:
        observation, _ = env.reset(seed=seed)
        question = observation.split("\n", 1)[0].removesuffix(" Put your final answer within \\boxed{}.")
        expression = re.sub(r"^What is the remainder when (\d+)\^(\d+) is divided by (\d+)\?$", r"pow(\1, \2, \3)", question)
        observation, reward, terminated, truncated, info = env.step(f"<python>print({expression})</python>")
        total = reward
        printed = observation.split("Code execution result: ", 1)[1].split()[0]
        _, reward, terminated, truncated, info = env.step(f"The answer is \\boxed{{{printed}}}.")
        return total + reward
    finally:
        env.close()


def run_gem_code_in_sandboxes() -> tuple[bool, str, str]:
    """gem-llm's own ``run_python``, routed into a sandbox for as long as ``install`` is on."""
    from gem.utils import sandbox as gem_sandbox_module

    from gem_sandbox.integrations import gem as drop_in

    drop_in.install(backend="local")
    try:
        return gem_sandbox_module.run_python("print(6 * 7)", "none")
    finally:
        drop_in.uninstall()


def main(keep_gem: bool = False) -> None:
    if keep_gem:
        print(run_gem_code_in_sandboxes())
    else:
        print("episode reward", solve_with_python())


if __name__ == "__main__":
    main()
