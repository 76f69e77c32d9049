"""``gem-sandbox demo``: scripted policies play a few envs, then code runs in a real sandbox.

The policies read only the observations, as a model would: binary search on GuessTheNumber's
hints, the recursive plan for Tower of Hanoi, and for a math problem with GEM's Python tool a
program that computes the answer, whose printed result is then boxed. The sandbox parts run on
the configured backend (``auto``: Docker when its image is built, else bubblewrap), which is
resolved and checked before anything plays: a bad setting or a machine without a sandbox fails
at once, not after the games.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
import time
from collections.abc import Callable, Iterator

import gem_sandbox as gem
from gem_sandbox.cli.args import positive_int
from gem_sandbox.core import Env
from gem_sandbox.sandbox import defaults


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = subparsers.add_parser("demo", help="play a few episodes with scripted policies and show the transcript")
    demo.add_argument("--episodes", type=positive_int, default=1, help="episodes per env")
    demo.add_argument("--backend", default=None, help="sandbox backend: auto, docker, local or process (default: configured or auto)")
    demo.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    return main(episodes=args.episodes, backend=args.backend)


Policy = Callable[[str], Iterator[str]]
UNISOLATED_WARNING = (
    "gem-sandbox: warning: the process backend is NOT isolated: sandbox code runs as plain host "
    "processes that see your files and network; use --backend local or docker for untrusted code"
)


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


# How the scripted "model" turns each kind of math question into a program.
PROGRAMS = [
    (r"What is (\d+) multiplied by (\d+)\?", "print({} * {})"),
    (r"remainder when (\d+)\^(\d+) is divided by (\d+)", "print(pow({}, {}, {}))"),
    (r"multiples of (\d+) from (\d+) to (\d+)", "print(sum(n for n in range({1}, {2} + 1) if n % {0} == 0))"),
    (r"prime numbers are less than (\d+)", "print(sum(all(n % d for d in range(2, n)) for n in range(2, {})))"),
    (r"decimal digits of (\d+)\^(\d+)", "print(sum(map(int, str({} ** {}))))"),
]


def python_tool_user(first_obs: str) -> Iterator[str]:
    """Writes a program for the question, runs it with the Python tool, boxes what it printed."""
    for pattern, template in PROGRAMS:
        if match := re.search(pattern, first_obs):
            feedback = yield f"Let me compute it.\n<python>\n{template.format(*match.groups())}\n</python>"
            break
    else:
        raise ValueError(f"the scripted model cannot read this question: {first_obs[:80]!r}")
    printed = feedback.removeprefix("Code execution result: ").strip()
    yield f"The program printed {printed}, so the answer is \\boxed{{{printed}}}."


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
        print(textwrap.indent(f"> {action}\n< {obs.strip()}   (reward {reward:+.2f})", "  "))
        if terminated or truncated:
            return total
        action = actions.send(obs)


def sandbox_demo(backend: str) -> None:
    """Run a stateless script and a timed-out one on a runtime of warm sandboxes."""
    with gem.SyncRuntime(backend, min_idle=1, max_size=2) as runtime:
        runtime.wait_ready()
        print(f"\n== sandbox ({runtime.backend}): a stateless run through a warm pool")
        code = "import sys, os\nprint(sum(range(10**6)), 'as uid', os.getuid(), 'on', sys.platform)"
        start = time.perf_counter()
        result = runtime.run(code)
        print(f"  $ python -c {code!r}\n  {result.stdout.strip()}  [{result.status.value}, "
              f"{(time.perf_counter() - start) * 1000:.1f} ms round trip]")
        timed_out = runtime.run("import time; print('working', flush=True); time.sleep(60)", timeout=1)
        print(f"  a 60 s sleep with a 1 s timeout -> {timed_out.status.value} after "
              f"{timed_out.duration_ms:.0f} ms, partial output {timed_out.stdout.strip()!r}")


def tool_demo(episodes: int, backend: str) -> None:
    """Math with GEM's ``python_tool`` wrapper: the tool call runs on the process default
    runtime (configured to ``backend``), as GEM-style sync code without a runtime of its own does."""
    from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns  # only the demo needs them

    env: Env = gem.make("math:Arithmetic-v0")
    for wrapper in get_wrapper_fns("python_tool"):
        env = wrapper(env)
    for episode in range(episodes):
        print(f"\n== math:Arithmetic-v0 + python_tool ({backend} sandbox), episode {episode + 1}")
        total = play(env, python_tool_user, seed=episode)
        print(f"  episode return {total:+.2f} (0.05 per tool use + 0.25 per success + 1.0 if correct)")
    env.close()


def choose_backend(backend: str | None) -> str:
    """The backend ``backend`` (else the configured one) means here, made the process default.
    Raises ``ConfigError`` for a bad setting or name, ``BackendNotAvailable`` when it cannot run."""
    defaults.pool_config()  # parses and checks every GEM_SANDBOX_* variable
    name = backend or defaults.backend_name()
    resolved = defaults.resolve_backend_name(name)
    gem.configure(resolved)  # pinned: the tool demo's default runtime cannot resolve differently
    print(f"== sandbox backend: {name} -> {resolved}" if name != resolved else f"== sandbox backend: {name}")
    if resolved == "process":
        print(UNISOLATED_WARNING, file=sys.stderr)
    return resolved


def main(episodes: int = 1, backend: str | None = None) -> int:
    resolved = choose_backend(backend)
    for env_id, policy in DEMOS.items():
        env = gem.make(env_id)
        for episode in range(episodes):
            print(f"\n== {env_id}, episode {episode + 1}")
            total = play(env, policy, seed=episode)
            print(f"  episode return {total:+.2f}")
    tool_demo(episodes, resolved)
    sandbox_demo(resolved)
    return 0
