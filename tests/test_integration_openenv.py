"""`gem-sandbox openenv` against openenv-core's own client, over real HTTP and WebSocket.

Each server is the command itself in a subprocess (loopback, a free port, the local backend);
the client is OpenEnv's ``GenericEnvClient``, unmodified. Rewards are checked against GEM's
env (gem-llm 0.1.0) where GEM has the env, and against our env driven directly where it does
not (GEM registers no ``game:GuessTheNumber-v0`` and no ``math:Arithmetic-v0``).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="needs openenv-core: pip install 'gem-sandbox[openenv]'")

import gem  # noqa: E402
from gem.wrappers.wrapper_factory import get_wrapper_fns as gem_wrapper_fns  # noqa: E402
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

import gem_sandbox  # noqa: E402
from gem_sandbox.core import close_env  # noqa: E402
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]

    def get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as response:
            return json.loads(response.read())

    def client(self) -> Any:
        return GenericEnvClient(base_url=self.url).sync()


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gem_sandbox.cli", "openenv", *args]


@contextmanager
def served(*args: str) -> Iterator[Server]:
    """``gem-sandbox openenv ARGS`` on a free loopback port until the block ends (SIGTERM)."""
    process = subprocess.Popen(
        command(*args, "--port", "0", "--backend", "local"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline()  # the announcement, once the env built and the port is bound
        found = re.search(r" at (http://\S+) ", line)
        if found is None:
            process.kill()
            raise AssertionError(f"the server did not start: {line}{process.communicate(timeout=30)[1]}")
        server = Server(found.group(1), process)
        assert server.get("/health") == {"status": "healthy"}
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)


Turn = tuple[str, float | None, bool]  # (observation text, reward, done) as the client saw it


def play_served(server: Server, seed: int, moves: list[str]) -> list[Turn]:
    with server.client() as client:
        return play_client(client, seed, moves)


def play_client(client: Any, seed: int, moves: list[str]) -> list[Turn]:
    result = client.reset(seed=seed)
    turns = [(result.observation["prompt"], result.reward, result.done)]
    for move in moves:
        result = client.step({"message": move})
        turns.append((result.observation["prompt"], result.reward, result.done))
        if result.done:
            break
    return turns


def play_direct(env: Any, seed: int, moves: list[str]) -> list[Turn]:
    obs, _ = env.reset(seed=seed)
    turns: list[Turn] = [(obs, None, False)]
    for move in moves:
        obs, reward, terminated, truncated, _ = env.step(move)
        turns.append((obs, float(reward), terminated or truncated))
        if terminated or truncated:
            break
    close_env(env)  # GEM's envs have no close()
    return turns


GUESSES = [r"\boxed{10}", r"\boxed{5}", r"\boxed{15}", r"\boxed{7}", r"\boxed{3}", r"\boxed{8}", "no move", r"\boxed{9}"]


# -- the game, through the generic client --------------------------------------------------
@pytest.fixture(scope="module")
def guess_easy() -> Iterator[Server]:
    with served("game:GuessTheNumber-v0-easy", "--wrappers", "python_tool", "--max-sessions", "2") as server:
        yield server


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_game_with_python_tool_gives_gems_rewards(guess_easy: Server, seed: int) -> None:
    moves = ["<python>print(6 * 7)</python>", *GUESSES]
    env = gem.make("game:GuessTheNumber-v0-easy")
    for wrap in gem_wrapper_fns("python_tool", tokenizer=None):
        env = wrap(env)
    expected = play_direct(env, seed, moves)
    served_turns = play_served(guess_easy, seed, moves)
    assert [t[1:] for t in served_turns] == [t[1:] for t in expected]
    assert [t[0] for t in served_turns] == [t[0] for t in expected]  # GEM's text, the tool's output included
    assert "42" in served_turns[1][0]


def test_gem_info_reaches_the_client(guess_easy: Server) -> None:
    with guess_easy.client() as client:
        client.reset(seed=1)
        result = client.step({"message": "<python>print(1)</python>"})
    info = result.observation["info"]
    assert info["tool_use_counter"] == 1 and info["tool_success_counter"] == 1
    assert info["tool_status"] == "ok"
    assert result.observation["terminated"] is False and result.observation["truncated"] is False


@pytest.fixture(scope="module")
def guess() -> Iterator[Server]:
    with served("game:GuessTheNumber-v0", "--max-sessions", "4") as server:
        yield server


def test_game_gem_lacks_matches_our_env_played_directly(guess: Server) -> None:
    expected = play_direct(gem_sandbox.make("game:GuessTheNumber-v0"), 5, GUESSES)
    assert play_served(guess, 5, GUESSES) == expected
    assert expected[-1][2]  # the moves end the episode


def test_reset_honours_the_seed(guess: Server) -> None:
    first = play_served(guess, 7, [])
    assert play_served(guess, 7, []) == first
    assert [t[0] for t in play_served(guess, 7, GUESSES[:3])] != [t[0] for t in play_served(guess, 8, GUESSES[:3])]


def test_two_sessions_are_independent(guess: Server) -> None:
    expected = {seed: play_direct(gem_sandbox.make("game:GuessTheNumber-v0"), seed, GUESSES) for seed in (1, 2)}
    with guess.client() as one, guess.client() as two:
        turns = {1: [], 2: []}
        for seed, client in ((1, one), (2, two)):
            result = client.reset(seed=seed)
            turns[seed].append((result.observation["prompt"], result.reward, result.done))
        for move in GUESSES:  # interleaved: each session's moves land in its own episode
            for seed, client in ((1, one), (2, two)):
                if turns[seed][-1][2]:
                    continue
                result = client.step({"message": move})
                turns[seed].append((result.observation["prompt"], result.reward, result.done))
    assert turns == expected


def test_malformed_action_is_refused_and_the_session_survives(guess: Server) -> None:
    expected = play_direct(gem_sandbox.make("game:GuessTheNumber-v0"), 4, GUESSES[:2])
    with guess.client() as client:
        client.reset(seed=4)
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"msg": r"\boxed{10}"})
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"message": 10})
        first = client.step({"message": GUESSES[0]})
        second = client.step({"message": GUESSES[1]})
    assert [(r.observation["prompt"], r.reward, r.done) for r in (first, second)] == expected[1:]


def test_step_before_reset_is_a_clear_error(guess: Server) -> None:
    with guess.client() as client:
        with pytest.raises(RuntimeError, match="no episode running: call reset"):
            client.step({"message": r"\boxed{10}"})
        assert client.reset(seed=0).done is False  # still usable


def test_stateless_http_step_answers_409(guess: Server) -> None:
    request = urllib.request.Request(
        f"{guess.url}/step",
        data=json.dumps({"action": {"message": r"\boxed{10}"}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 409
    assert "/ws" in json.loads(refused.value.read())["detail"]


# -- sessions past --max-sessions ----------------------------------------------------------
def test_a_session_past_max_sessions_is_refused_not_queued() -> None:
    with served("game:GuessTheNumber-v0", "--max-sessions", "1") as server:
        with server.client() as first:
            first.reset(seed=0)
            with pytest.raises(ConnectionError, match="HTTP 503"):
                server.client().connect()
            assert first.step({"message": GUESSES[0]}).done is False  # the first is untouched

        def admitted() -> bool:
            try:
                with server.client() as third:
                    return third.reset(seed=0).done is False
            except ConnectionError:
                return False

        wait_for(admitted, "the freed slot to admit a new session")


# -- a tool env whose sandboxes the server leases ------------------------------------------
PRODUCT = re.compile(r"What is (\d+) multiplied by (\d+)\?")


def solve_with_tool(client: Any, seed: int) -> list[Turn]:
    """Reset, ask the sandbox for the product, answer with what the sandbox printed."""
    result = client.reset(seed=seed)
    turns = [(result.observation["prompt"], result.reward, result.done)]
    a, b = PRODUCT.search(result.observation["prompt"]).groups()
    result = client.step({"message": f"<python>print({a} * {b})</python>"})
    turns.append((result.observation["prompt"], result.reward, result.done))
    printed = re.search(r"Code execution result: (\d+)", result.observation["prompt"]).group(1)
    result = client.step({"message": rf"The answer is \boxed{{{printed}}}."})
    turns.append((result.observation["prompt"], result.reward, result.done))
    return turns


def test_arithmetic_with_python_tool_matches_our_env() -> None:
    with served("math:Arithmetic-v0", "--wrappers", "python_tool", "--env-option", 'kinds=["product"]') as server:
        with server.client() as client:
            served_turns = solve_with_tool(client, 9)
        runs = server.get("/runtime")
    assert runs["backend"] == "local" and runs["leases"] >= 1  # the tool call ran in a sandbox
    with gem_sandbox.SyncRuntime("local", max_size=1) as runtime:
        env = gem_sandbox.make("math:Arithmetic-v0", kinds=["product"])
        for wrap in get_wrapper_fns("python_tool", runtime=runtime):
            env = wrap(env)
        a, b = PRODUCT.search(served_turns[0][0]).groups()
        moves = [f"<python>print({a} * {b})</python>", rf"The answer is \boxed{{{int(a) * int(b)}}}."]
        expected = play_direct(env, 9, moves)
    assert served_turns == expected
    assert [t[1] for t in served_turns] == [None, pytest.approx(0.3), 1.0]  # GEM's 0.05 + 0.25, then correct


@pytest.fixture(scope="module")
def stateful() -> Iterator[Server]:
    args = ["math:Arithmetic-v0", "--wrappers", "python_tool", "--stateful"]
    with served(*args, "--env-option", 'kinds=["product"]', "--max-size", "2") as server:
        yield server


CLIENT_THAT_VANISHES = """
import sys
from openenv.core.generic_client import GenericEnvClient
client = GenericEnvClient(base_url=sys.argv[1]).sync()
client.connect()
client.reset(seed=0)
client.step({"message": "<python>x = 41</python>"})
print("leased", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_client_that_vanishes_gives_its_sandbox_back(stateful: Server) -> None:
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT_THAT_VANISHES, stateful.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert client.stdout.readline().strip() == "leased"
        assert stateful.get("/runtime")["leased"] == 1  # the episode's kernel holds a sandbox
    finally:
        client.kill()  # no close message, no goodbye: the socket just drops
        client.wait(timeout=30)
    wait_for(lambda: stateful.get("/runtime")["leased"] == 0, "the session's sandbox to come back")


def test_stateful_episode_keeps_its_kernel_and_gives_it_back_on_close(stateful: Server) -> None:
    with stateful.client() as client:
        client.reset(seed=2)
        client.step({"message": "<python>x = 41</python>"})
        result = client.step({"message": "<python>print(x + 1)</python>"})
        assert "42" in result.observation["prompt"]
        assert stateful.get("/runtime")["leased"] == 1
    wait_for(lambda: stateful.get("/runtime")["leased"] == 0, "the closed session's sandbox to come back")


def test_example_client_wins_an_episode(guess_easy: Server) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        from openenv_client import play
    finally:
        sys.path.remove(str(EXAMPLES))
    assert play(guess_easy.url, seed=2, verbose=False) == pytest.approx(0.3 + 1.0)  # the tool call, then the win


def test_trl_example_trains_on_served_episodes() -> None:
    pytest.importorskip("trl", reason="needs trl (and torch, transformers)")
    sys.path.insert(0, str(EXAMPLES))
    try:
        from trl_openenv import train
    finally:
        sys.path.remove(str(EXAMPLES))
    with served("game:GuessTheNumber-v0", "--max-sessions", "2") as server:
        history = train(server.url, steps=2, episodes=2, generations=2, max_turns=2, max_new_tokens=8)
    steps = [record for record in history if "reward" in record]
    assert [record["step"] for record in steps] == [1, 2]
    # An untrained model writes no \boxed{} guess: each episode ends on the env's format penalty.
    assert all(record["rewards/env_reward/mean"] == pytest.approx(-0.1) for record in steps)


# -- bad command lines ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["game:NoSuchGame-v0"], r"no environment 'game:NoSuchGame-v0' is registered"),
        (["game:GuessTheNumber-v0", "--wrappers", "python_tool,no_such_wrapper"], r"unknown wrapper 'no_such_wrapper'"),
    ],
)
def test_bad_env_or_wrapper_exits_nonzero_with_one_line(args: list[str], message: str) -> None:
    done = subprocess.run(command(*args, "--port", "0"), check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gem-sandbox: error: ")
    assert re.search(message, lines[0])
    assert done.stdout == ""  # never announced a server
