"""Sandbox pools across a real Ray cluster: two nodes on this machine (``ray start --head`` and
``ray start --address``, each on a loopback address of its own), a pool actor on each, and
runtimes, Ray tasks and Ray actors leasing across them.

The pytest process is a driver on the head node (127.0.0.2); the other node is 127.0.0.3. Each
test places a set of pool actors of its own and removes it after.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.cluster import NodeSettings, RaySandbox, client, placement
from gem_sandbox.sandbox.cluster.loopback import HEAD_ADDRESS, LoopbackCluster
from gem_sandbox.sandbox.errors import BackendNotAvailable, ConfigError, SandboxCrashed, SandboxUnavailable
from gem_sandbox.sandbox.result import Status

pytestmark = [pytest.mark.anyio, pytest.mark.ray, pytest.mark.slow]

OTHER = "127.0.0.3"
_names = itertools.count(1)
# Functions in this module run in Ray's workers, which cannot import the tests package.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

Place = Callable[..., str]


# A silent node is declared dead after about 2 s instead of Ray's 15 to 30 (the killed-node test
# waits for that before the node comes back); the client's deadlines do not depend on it.
FAST_DEATH = {"health_check_period_ms": 500, "health_check_timeout_ms": 500, "health_check_failure_threshold": 4}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    with LoopbackCluster(system_config=FAST_DEATH) as cluster:
        cluster.add_node()
        cluster.join()
        try:
            yield cluster
        finally:
            ray.shutdown()


@pytest.fixture
def place(cluster: LoopbackCluster) -> Iterator[Place]:
    """``place(backend="local", lease_ttl=120, **options)``: a new set of pool actors, one per
    node, ready; its name. Removed (sandboxes and all) after the test."""
    placed: list[str] = []

    def place(backend: str = "local", lease_ttl: float = 120.0, **options: Any) -> str:
        name = f"t{os.getpid()}-{next(_names)}"
        placed.append(name)
        options = {"max_size": 2, "min_idle": 1, **options}
        ready = placement.place(name, NodeSettings(backend, options, lease_ttl))
        assert [p.state for p in ready] == ["ready"] * len(cluster.nodes), placement.table(ready)
        return name

    yield place
    for name in placed:
        assert all(p.problem is None for p in placement.remove(name))


def nodes_of(pools: str) -> dict[str, dict[str, Any]]:
    """What each pool actor of ``pools`` says of itself, by node address."""
    return {p.address: p.described for p in placement.status(pools) if p.described}


def actor_on(pools: str, address: str) -> Any:
    (actor,) = [a for _, a in placement.pool_actors(pools) if ray.get(a.describe.remote())["address"] == address]
    return actor


# -- naming the pools -----------------------------------------------------------------------


def test_gem_sandbox_ray_makes_a_runtime_given_no_backend_lease_from_the_cluster(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(defaults, "_backend_name", None)
    monkeypatch.delenv("GEM_SANDBOX_URL", raising=False)
    monkeypatch.setenv("GEM_SANDBOX_RAY", "default")
    assert repr(Runtime()) == "<Runtime ray new>"
    assert repr(Runtime("local")) == "<Runtime local new>"
    monkeypatch.setenv("GEM_SANDBOX_URL", "http://127.0.0.1:8080")
    with pytest.raises(ConfigError, match="GEM_SANDBOX_URL and GEM_SANDBOX_RAY are both set"):
        Runtime()


def test_a_runtime_takes_ray_pools_or_a_backend_not_both():
    with pytest.raises(ConfigError, match="not a backend .'docker'. and Ray pools .'default'."):
        Runtime("docker", ray="default")


# -- placing ---------------------------------------------------------------------------------


def test_ray_up_places_one_pool_actor_per_node_and_placing_again_keeps_them(cluster: LoopbackCluster):
    env = {**os.environ, **cluster.environment()}
    name = f"cli{os.getpid()}"

    def gem_sandbox(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "gem_sandbox.cli", "ray", *args, "--name", name]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)

    up = gem_sandbox("up", "--backend", "local", "--pool", "max_size=1", "--pool", "min_idle=1")
    assert up.returncode == 0, up.stderr
    assert sorted(line.split()[1] for line in up.stdout.splitlines()[1:]) == [HEAD_ADDRESS, OTHER], up.stdout
    pids = {address: d["pid"] for address, d in nodes_of(name).items()}
    assert sorted(pids) == [HEAD_ADDRESS, OTHER]

    again = gem_sandbox("up", "--backend", "local")
    assert again.returncode == 0, again.stderr
    assert {address: d["pid"] for address, d in nodes_of(name).items()} == pids

    status = gem_sandbox("status")
    assert status.returncode == 0 and status.stdout.count("ready") == 2, status.stdout

    down = gem_sandbox("down")
    assert down.returncode == 0 and down.stdout.count("removed") == 2, down.stdout + down.stderr
    assert placement.pool_actors(name) == []


def test_placing_with_a_resource_takes_only_the_nodes_that_have_it(cluster: LoopbackCluster):
    name = f"res{os.getpid()}"
    try:
        placed = placement.place(name, NodeSettings("local", {"max_size": 1}), resource="loopback_3")
        assert [(p.address, p.state) for p in placed] == [(OTHER, "ready")]
        assert list(nodes_of(name)) == [OTHER]
    finally:
        placement.remove(name)


def test_a_bad_pool_option_fails_ray_up_before_it_reaches_the_cluster(cluster: LoopbackCluster):
    command = [sys.executable, "-m", "gem_sandbox.cli", "ray", "up", "--pool", "max_sise=4"]
    done = subprocess.run(command, env={**os.environ, **cluster.environment()}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "max_sise" in done.stderr and "max_size" in done.stderr


async def test_a_runtime_naming_pools_no_one_placed_says_how_to_place_them(cluster: LoopbackCluster):
    with pytest.raises(BackendNotAvailable, match="gem-sandbox ray up --name nowhere"):
        async with Runtime(ray="nowhere") as runtime:
            await runtime.run("print(1)")


# -- leases and runs ---------------------------------------------------------------------------


async def test_leases_fill_the_callers_node_first_then_go_where_there_is_room(place: Place):
    pools = place(max_size=2)
    async with Runtime(ray=pools) as runtime:
        leases = [await runtime.acquire() for _ in range(4)]
        assert isinstance(leases[0], RaySandbox)
        assert [sb.node.address for sb in leases] == [HEAD_ADDRESS, HEAD_ADDRESS, OTHER, OTHER]
        with pytest.raises(SandboxUnavailable):
            await runtime.acquire(timeout=1)
        await runtime.release(leases[0])
        again = await runtime.acquire(timeout=10)
        assert again.node.address == HEAD_ADDRESS
        for sb in [*leases[1:], again]:
            await runtime.release(sb)
    assert {address: d["leases_held"] for address, d in nodes_of(pools).items()} == {HEAD_ADDRESS: 0, OTHER: 0}


async def test_a_lease_keeps_its_files_shell_and_kernel_on_its_node(place: Place):
    pools = place()
    async with Runtime(ray=pools) as runtime, runtime.lease() as sb:
        await sb.write_files({"data/n.txt": "41"})
        assert (await sb.shell("cd data && export K=1")).status is Status.OK
        assert (await sb.shell("echo $(pwd) $K")).stdout.strip().endswith("data 1")
        assert (await sb.kernel_exec("n = int(open('data/n.txt').read()) + 1")).status is Status.OK
        assert (await sb.kernel_exec("print(n)")).stdout == "42\n"
        assert (await sb.kernel_exec("n", display=True)).display == ({"text/plain": "42"},)
        result = await sb.run("import os; print(os.getcwd())", cwd="data")
        assert result.stdout.strip().endswith("/data")
        assert await sb.read_files(["data/n.txt"]) == {"data/n.txt": b"41"}
        await sb.reset()
        assert (await sb.shell("ls data 2>&1; echo $K")).stdout.strip().endswith("No such file or directory")
        assert await sb.ping() > 0


@pytest.mark.parametrize(
    ("code", "status", "exit_code"),
    [
        ("print('ok')", Status.OK, 0),
        ("print('Success'); raise SystemExit(1)", Status.ERROR, 1),  # its text is not a verdict
        ("import sys; sys.stderr.write('infra_error'); sys.exit(3)", Status.ERROR, 3),
        ("import time; time.sleep(30)", Status.TIMEOUT, None),
    ],
)
async def test_a_run_through_ray_gets_the_pools_own_verdict(place: Place, code: str, status: Status, exit_code: int | None):
    pools = place()
    async with Runtime(ray=pools) as runtime:
        result = await runtime.run(code, timeout=1.0)
        async with runtime.lease() as sb:
            leased = await sb.run(code, timeout=1.0)
    for r in (result, leased):
        assert r.status is status, r
        if exit_code is not None:
            assert r.exit_code == exit_code


async def test_stateless_runs_go_where_there_is_room(place: Place):
    pools = place(max_size=2)
    before = {address: d["statistics"]["leases"] for address, d in nodes_of(pools).items()}
    async with Runtime(ray=pools) as runtime:
        results = []

        async def run() -> None:
            results.append(await runtime.run("import time; time.sleep(0.5); print('done')", timeout=10))

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(run)
    assert [r.stdout for r in results] == ["done\n"] * 8
    served = {address: d["statistics"]["leases"] - before[address] for address, d in nodes_of(pools).items()}
    assert sum(served.values()) == 8 and all(count > 0 for count in served.values()), served


def _lease_from_this_node(pools: str) -> str:
    """In a Ray task: lease through a runtime as a trainer's worker would; the lease's node."""

    async def lease() -> str:
        async with Runtime(ray=pools) as runtime, runtime.lease() as sb:
            assert (await sb.run("print(1)")).stdout == "1\n"
            return sb.node.address

    return anyio.run(lease)


async def test_a_ray_task_on_another_node_leases_from_its_own_node(place: Place):
    pools = place()
    other = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == OTHER][0]
    task = ray.remote(_lease_from_this_node).options(scheduling_strategy=NodeAffinitySchedulingStrategy(other, soft=False))
    assert await task.remote(pools) == OTHER


class _Holder:
    """A Ray actor that leases sandboxes and keeps them: a client that can be killed."""

    async def hold(self, pools: str, count: int) -> list[str]:
        self.runtime = Runtime(ray=pools)
        await self.runtime.__aenter__()
        self.leases = [await self.runtime.acquire() for _ in range(count)]
        return [sb.node.address for sb in self.leases]


async def test_the_leases_of_a_client_that_died_return_to_the_pool_within_the_ttl(place: Place):
    pools = place(max_size=2, lease_ttl=2.0)
    holder = ray.remote(_Holder).options(num_cpus=0).remote()
    (where,) = set(await holder.hold.remote(pools, 2))  # the holder's own node
    assert nodes_of(pools)[where]["leases_held"] == 2
    ray.kill(holder)
    with anyio.fail_after(15):
        while (held := nodes_of(pools)[where])["leases_held"]:
            await anyio.sleep(0.2)
    assert held["leases_expired"] == 2 and held["free"] == 2


# -- faults ------------------------------------------------------------------------------------


async def test_a_killed_pool_actor_fails_its_calls_typed_and_new_leases_go_to_the_other_node(
    place: Place, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(client, "LOOK_INTERVAL", 1.0)
    pools = place(max_size=2)
    async with Runtime(ray=pools) as runtime:
        mine = [await runtime.acquire() for _ in range(2)]
        assert {sb.node.address for sb in mine} == {HEAD_ADDRESS}
        started = time.monotonic()
        results = []

        async def long_run() -> None:
            results.append(await mine[0].run("import time; time.sleep(60)", timeout=30))

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_run)
            await anyio.sleep(1.0)
            ray.kill(actor_on(pools, HEAD_ADDRESS))
        assert results[0].status is Status.INFRA_ERROR and time.monotonic() - started < 15, results
        assert (await mine[1].run("print(1)")).status is Status.INFRA_ERROR
        with pytest.raises(SandboxCrashed):
            await mine[1].read_files(["x"])
        assert (await runtime.run("print(2)")).stdout == "2\n"
        fresh = await runtime.acquire(timeout=10)
        assert fresh.node.address == OTHER
        await runtime.release(fresh)
        for sb in mine:
            await runtime.release(sb)  # their node is gone: logged, not raised

        await anyio.to_thread.run_sync(lambda: placement.place(pools, NodeSettings("local", {"max_size": 2, "min_idle": 1})))
        with anyio.fail_after(20):
            while HEAD_ADDRESS not in [node.address for node in (await runtime.pool()).nodes()]:  # type: ignore[union-attr]
                await anyio.sleep(0.2)
        back = await runtime.acquire(timeout=10)
        assert back.node.address == HEAD_ADDRESS
        await runtime.release(back)


@pytest.mark.docker
async def test_a_killed_node_fails_its_calls_in_time_and_leaves_no_container_once_back(
    cluster: LoopbackCluster, place: Place, docker_client: Any, sandbox_image: str
):
    from gem_sandbox.sandbox.backends.docker import OWNER_LABEL
    from gem_sandbox.sandbox.backends.owners import owner_id

    pools = place("docker", max_size=2, image=sandbox_image)
    described = nodes_of(pools)[OTHER]
    dead_owner = owner_id(described["pid"])
    async with Runtime(ray=pools) as runtime:
        leases = [await runtime.acquire() for _ in range(4)]
        theirs = [sb for sb in leases if sb.node.address == OTHER]
        assert len(theirs) == 2
        containers = docker_client.containers.list(filters={"label": f"{OWNER_LABEL}={dead_owner}"})
        assert len(containers) >= 2
        started = time.monotonic()
        results = []

        async def long_run(sb: Any) -> None:
            results.append(await sb.run("import time; time.sleep(60)", timeout=20))

        async with anyio.create_task_group() as tg:
            for sb in theirs:
                tg.start_soon(long_run, sb)
            await anyio.sleep(1.0)
            cluster.kill_node(OTHER)
        assert [r.status for r in results] == [Status.INFRA_ERROR] * 2
        assert time.monotonic() - started < 20 + client.MARGIN
        for sb in leases:
            await runtime.release(sb)
        for _ in range(3):  # the survivor serves every new lease and run
            async with runtime.lease(timeout=10) as sb:
                assert sb.node.address == HEAD_ADDRESS
                assert (await sb.run("print(3)")).stdout == "3\n"

    # Once the cluster has declared it dead, the node comes back (a new raylet at the same
    # address). Its containers' agents end when their streams close; what is still there
    # (an agent that hung) the new pool actor removes, as any pool starting on a host does.
    with anyio.fail_after(30):
        while described["node_id"] in [n["NodeID"] for n in placement.cluster_nodes()]:
            await anyio.sleep(0.2)
    cluster.add_node(OTHER)
    ready = await anyio.to_thread.run_sync(lambda: placement.place(pools, NodeSettings("docker", {"max_size": 2, "image": sandbox_image})))
    assert [p.state for p in ready] == ["ready", "ready"], placement.table(ready)
    left = docker_client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={dead_owner}"})
    assert left == [], f"the dead node's containers outlived its return: {[c.short_id for c in left]}"


# -- trainers ----------------------------------------------------------------------------------


def _play(pools: str) -> dict[str, Any]:
    """In a Ray task, as a trainer's rollout worker: a tool-using vector env whose Python tool
    runs on the cluster (``GEM_SANDBOX_RAY`` is set by the task's runtime env)."""
    import gem_sandbox as gs
    from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns

    assert os.environ["GEM_SANDBOX_RAY"] == pools
    env = gs.make_vec(
        ["game:GuessTheNumber-v0-easy"] * 2,
        vec_kwargs=[{"seed": 3 + i} for i in range(2)],
        wrappers=get_wrapper_fns("python_tool_no_int_reward,concat_with_action"),
        async_mode=False,
    )
    env.reset()
    observations, *_ = env.step(["<python>print(6 * 7)</python>"] * 2)
    episodes = [0, 0]
    for _ in range(10):  # the easy game ends within 4 guesses
        _, _, terminated, truncated, _ = env.step(["\\boxed{1}"] * 2)
        episodes = [e + int(done) for e, done in zip(episodes, terminated | truncated)]
        if all(episodes):
            break
    env.close()
    return {"episodes": episodes, "tool_output": list(observations)}


async def test_a_tool_using_vector_env_in_a_ray_task_runs_its_tools_on_the_cluster(place: Place):
    pools = place()
    before = sum(d["statistics"]["leases"] for d in nodes_of(pools).values())
    task = ray.remote(_play).options(runtime_env={"env_vars": {"GEM_SANDBOX_RAY": pools}})
    played = await task.remote(pools)
    assert all(played["episodes"]), played
    assert all("42" in observation for observation in played["tool_output"]), played
    served = sum(d["statistics"]["leases"] for d in nodes_of(pools).values()) - before
    assert served >= 2, f"the pool actors served {served} runs; the two tool calls ran elsewhere"


def test_doctor_reports_the_pool_actors_a_runtime_would_use(cluster: LoopbackCluster, place: Place):
    pools = place()
    env = {**os.environ, **cluster.environment(), "GEM_SANDBOX_RAY": pools}
    done = subprocess.run([sys.executable, "-m", "gem_sandbox.cli", "doctor"], env=env, capture_output=True, text=True, timeout=120)
    (line,) = [line for line in done.stdout.splitlines() if line[4:].startswith("ray")]
    assert line.startswith("ok ") and f"2 of 2 pool actors of {pools!r} answer" in line, done.stdout

    env["GEM_SANDBOX_RAY"] = "nowhere"
    done = subprocess.run([sys.executable, "-m", "gem_sandbox.cli", "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "gem-sandbox ray up --name nowhere" in done.stdout
