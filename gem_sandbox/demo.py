"""``gem-sandbox demo``: scripted policies play a few envs, then code runs in a real sandbox.

The policies read only the observations, as a model would: binary search on GuessTheNumber's
hints, the recursive plan for Tower of Hanoi. The sandbox part runs on the default backend
(Docker when its image is built, else bubblewrap), showing what a tool call costs.
"""

from __future__ import annotations

import re
import textwrap
import time
from collections.abc import Callable, Iterator

import gem_sandbox as gem
from gem_sandbox.core import Env

Policy = Callable[[str], Iterator[str]]


def guess_the_number(first_obs: str) -> Iterator[str]:
    """Binary search over the announced range, narrowed by the 'higher'/'lower' hints."""
    low, high = map(int, re.search(r"between (\d+) and (\d+)", first_obs).groups())
    while low <= high:
        guess = (low + high) // 2
        feedback = yield f"My guess is \\boxed{{{guess}}}."
        if "higher" in feedback:
            low = guess + 1
        elif "lower" in feedback:
            high = guess - 1


def tower_of_hanoi(first_obs: str) -> Iterator[str]:
    """The classic recursion: move n-1 aside, move the largest, move n-1 on top."""
    disks = int(re.search(r"with (\d+) disks", first_obs).group(1))

    def moves(n: int, src: str, dst: str, via: str) -> Iterator[tuple[str, str]]:
        if n:
            yield from moves(n - 1, src, via, dst)
            yield src, dst
            yield from moves(n - 1, via, dst, src)

    for src, dst in moves(disks, "A", "C", "B"):
        yield f"\\boxed{{{src} {dst}}}"


DEMOS: dict[str, Policy] = {
    "game:GuessTheNumber-v0": guess_the_number,
    "game:TowerofHanoi-v0-easy": tower_of_hanoi,
}


def play(env: Env, policy: Policy, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    print(textwrap.indent(obs.strip(), "  | "))
    actions = policy(obs)
    action = next(actions)
    total = 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(action)
        total += reward
        print(f"  > {action}\n  < {obs.strip()}   (reward {reward:+.2f})")
        if terminated or truncated:
            return total
        action = actions.send(obs)


def sandbox_demo(backend: str | None) -> None:
    """Run a stateless script and a persistent kernel in a pooled sandbox."""
    from gem_sandbox.sandbox.sync import SyncSandboxPool

    with SyncSandboxPool(backend=backend, min_idle=1, max_size=2) as pool:
        print(f"\n== sandbox ({pool.backend_name}): a stateless run through the pool")
        code = "import sys, os\nprint(sum(range(10**6)), 'as uid', os.getuid(), 'on', sys.platform)"
        start = time.perf_counter()
        result = pool.run(code)
        print(f"  $ python -c {code!r}\n  {result.stdout.strip()}  [{result.status.value}, "
              f"{(time.perf_counter() - start) * 1000:.1f} ms round trip]")
        timed_out = pool.run("import time; print('working', flush=True); time.sleep(60)", timeout=1)
        print(f"  a 60 s sleep with a 1 s timeout -> {timed_out.status.value} after "
              f"{timed_out.duration_ms:.0f} ms, partial output {timed_out.stdout.strip()!r}")


def main(episodes: int = 1, backend: str | None = None) -> int:
    for env_id, policy in DEMOS.items():
        env = gem.make(env_id)
        for episode in range(episodes):
            print(f"\n== {env_id}, episode {episode + 1}")
            total = play(env, policy, seed=episode)
            print(f"  episode return {total:+.2f}")
    sandbox_demo(backend)
    return 0
