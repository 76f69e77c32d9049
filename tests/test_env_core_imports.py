"""Playing an env without tools loads no sandbox code: the env core (contract, registry,
vector envs, the sync bridge, the plain wrappers) stands on its own.

Each case plays in a fresh interpreter, so that what is loaded is what playing needed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Module-name prefixes of the sandbox stack: the backends and pools, the in-sandbox agent,
# the tools, the runtime and the module hosting runtimes for sync code.
SANDBOX_CODE = (
    "gem_sandbox.sandbox",
    "gem_sandbox.agent",
    "gem_sandbox.tools",
    "gem_sandbox.runtime",
    "gem_sandbox.sync",
)
PLAY = r"""
import json, sys
import gem_sandbox as gem
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns
from gem_sandbox_envs.games.words import word_list

env_id = sys.argv[1]
moves = {
    "game:GuessTheNumber-v0": [f"\\boxed{{{n}}}" for n in range(1, 21)],
    "game:Wordle-v0": [f"\\boxed{{{word}}}" for word in word_list(5)[:20]],
}[env_id]
wrappers = get_wrapper_fns("concat,episode_tracking")

env = gem.make(env_id)
for wrap in wrappers:
    env = wrap(env)
env.reset(seed=0)
turns = 0
for move in moves:
    _, _, terminated, truncated, _ = env.step(move)
    turns += 1
    if terminated or truncated:
        break
env.close()

vec = gem.make_vec(env_id, wrappers=wrappers, num_envs=2, async_mode=True)
vec.reset(seed=0)
_, rewards, _, _, _ = vec.step([moves[0], moves[1]])
vec.close()

print(json.dumps({
    "ended": terminated or truncated,
    "turns": turns,
    "vector_rewards": len(rewards),
    "modules": sorted(m for m in sys.modules if m.startswith("gem_sandbox")),
}))
"""


def play(env_id: str) -> dict[str, object]:
    """Play ``env_id`` to its end through plain wrappers, then a step of an async vector of it."""
    done = subprocess.run([sys.executable, "-c", PLAY, env_id], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0", "game:Wordle-v0"])
def test_playing_a_game_loads_no_sandbox_code(env_id: str) -> None:
    played = play(env_id)
    assert played["ended"] and played["vector_rewards"] == 2
    loaded = [m for m in played["modules"] if m.startswith(SANDBOX_CODE)]
    assert loaded == []


def test_the_sync_bridge_is_what_plays_the_async_vector_env() -> None:
    """The check above is not vacuous: the bridge (the async core's sync face) was used."""
    played = play("game:GuessTheNumber-v0")
    assert {"gem_sandbox.bridge", "gem_sandbox.core", "gem_sandbox.vector.async_vector_env"} <= set(played["modules"])


def test_the_sandbox_names_still_come_from_the_package() -> None:
    import gem_sandbox
    from gem_sandbox.runtime import Runtime
    from gem_sandbox.sync import SyncRuntime

    assert (gem_sandbox.Runtime, gem_sandbox.SyncRuntime) == (Runtime, SyncRuntime)
    assert {"Runtime", "SyncRuntime", "configure"} <= set(dir(gem_sandbox))


def test_an_unknown_package_attribute_is_an_attribute_error() -> None:
    import gem_sandbox

    with pytest.raises(AttributeError, match="no attribute 'Runtim'"):
        gem_sandbox.Runtim  # noqa: B018
