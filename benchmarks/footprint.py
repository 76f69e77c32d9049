"""``gem-sandbox bench footprint``: what a sandbox costs in memory, how many stateful ones fit
on this machine, and where a local sandbox's start goes.

Memory is PSS (proportional set size, ``/proc/PID/smaps_rollup``) summed over every process of
a sandbox: for a local one its bwrap launcher and everything under it (bwrap's init, the
agent, the zygote, a prepared child, a kernel); for a Docker one its containerd shim and
everything under it. PSS splits each shared page among the processes that map it, so the sums
over many sandboxes add up to what they hold together. The baselines, measured beside ours in
the same process, are the same bwrap (namespaces and binds) or the same image running a bare
``python3`` that only sleeps: the floor of any sandbox with a Python in it.

The fit run leases N stateful sandboxes (each a kernel holding a variable), asks every kernel
for its variable at once, and releases them all together. It stops leasing early when the
machine's available memory falls below a floor, and says how many fitted.

``python -m benchmarks.footprint --fit 200`` runs it alone with another N.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.to_thread

from gem_sandbox.sandbox.backends.base import Backend
from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes
from gem_sandbox.sandbox.backends.local.argv import namespace_options, system_binds
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool

from .report import Row, percentile, print_table

SAMPLE = 8  # sandboxes whose memory is measured (and averaged) per row
FIT = 2000  # stateful sandboxes the fit run tries to hold at once
LAUNCHING = 32  # sandboxes the fit run starts at once
FLOOR_MB = 4096  # available memory the fit run leaves the machine (others use it too)
SLEEPER = "import time; time.sleep(3600)"
BARE = "bare python3 sleeping"


# --- processes and their memory -----------------------------------------------------------


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(ppid, []).append(int(name))
    return found


def _tree(root: int, children: dict[int, list[int]]) -> list[int]:
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def pss_kb(pids: list[int]) -> int:
    """The PSS of these processes together (those gone meanwhile count nothing)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except OSError:
            continue
    return total


def local_processes(box_ids: list[str]) -> dict[str, list[int]]:
    """Every process of each of these local sandboxes: its launcher and what runs under it."""
    wanted = set(box_ids)
    children = _children()
    return {p.box: _tree(p.pid, children) for p in bwrap_processes() if p.box in wanted and not p.init}


def docker_processes(container_ids: list[str]) -> dict[str, list[int]]:
    """Every process of each of these containers: its shim and what runs under it."""
    import docker

    client = docker.from_env()
    children = _children()
    found = {}
    for container_id in container_ids:
        init = client.containers.get(container_id).attrs["State"]["Pid"]
        with open(f"/proc/{init}/stat") as f:
            shim = int(f.read().rsplit(")", 1)[1].split()[1])
        found[container_id] = _tree(shim, children)
    return found


def mean_pss_mb(processes: dict[str, list[int]]) -> float:
    return sum(pss_kb(pids) for pids in processes.values()) / len(processes) / 1024


def available_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# --- baselines --------------------------------------------------------------------------


def _bwrap(python: str, *argv: str) -> list[str]:
    """The local backend's bwrap (its namespaces and host binds) running ``python argv``."""
    return ["bwrap", *namespace_options(os.geteuid() != 0), *system_binds(), "--", python, "-s", "-E", *argv]


@contextmanager
def bare_bwraps(python: str, count: int) -> Iterator[dict[str, list[int]]]:
    """``count`` bwraps, each running a sleeping ``python``: their processes by launcher."""
    launched = [subprocess.Popen(_bwrap(python, "-c", SLEEPER)) for _ in range(count)]
    try:
        deadline = time.monotonic() + 30
        while True:  # until each launcher has its init and the init its python
            children = _children()
            trees = {str(p.pid): _tree(p.pid, children) for p in launched}
            if all(len(pids) >= 3 for pids in trees.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        time.sleep(0.5)  # the interpreter is up and asleep
        yield trees
    finally:
        for process in launched:
            for pid in reversed(_tree(process.pid, _children())):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()


@contextmanager
def bare_containers(image: str, count: int) -> Iterator[dict[str, list[int]]]:
    """``count`` containers of ``image`` running a sleeping ``python3``: their processes."""
    import docker

    client = docker.from_env()
    containers = []
    try:
        for _ in range(count):
            containers.append(
                client.containers.run(image, ["python3", "-c", SLEEPER], detach=True, network_mode="none",
                                      labels={"gem-sandbox.bench": "footprint"})
            )
        time.sleep(1.0)
        yield docker_processes([str(c.id) for c in containers])
    finally:
        for container in containers:
            container.remove(force=True)


def bwrap_start_ms(argv: list[str], runs: int = 10) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


# --- our sandboxes ----------------------------------------------------------------------


async def idle_and_stateful_mb(backend: Backend, processes) -> tuple[float, float]:
    """Mean PSS of :data:`SAMPLE` sandboxes idle in the pool (each has run once, as pooled
    sandboxes idle), then of the same leased with a kernel holding a variable."""
    async with SandboxPool(backend, PoolConfig(min_idle=SAMPLE, max_size=SAMPLE)) as pool:
        await pool.wait_ready(timeout=120)
        boxes = [await pool.acquire() for _ in range(SAMPLE)]
        for sandbox in boxes:
            assert (await sandbox.run("print(1)")).ok
            await pool.release(sandbox)
        await pool.wait_ready(timeout=120)
        await anyio.sleep(1)
        ids = [sandbox.id for sandbox in boxes]
        idle = mean_pss_mb(await anyio.to_thread.run_sync(processes, ids))
        boxes = [await pool.acquire() for _ in range(SAMPLE)]
        for sandbox in boxes:
            assert (await sandbox.kernel_exec("x = 42")).ok
        await anyio.sleep(1)
        stateful = mean_pss_mb(await anyio.to_thread.run_sync(processes, [s.id for s in boxes]))
        for sandbox in boxes:
            await pool.release(sandbox)
    return idle, stateful


async def cold_start_ms(backend: Backend, runs: int = 10) -> list[float]:
    """A pool of one opened until its sandbox's agent has said hello."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        async with SandboxPool(backend, PoolConfig(min_idle=1, max_size=1)) as pool:
            await pool.wait_ready(timeout=60)
            samples.append((time.perf_counter() - start) * 1000)
    return samples


class FitRun:
    """:data:`FIT` stateful sandboxes at once: up, a concurrent round, all released."""

    def __init__(self, n: int, floor_mb: int = FLOOR_MB) -> None:
        self.n, self.floor_mb = n, floor_mb
        self.held: list[tuple[int, Sandbox]] = []
        self.errors: list[str] = []
        self.up_s = self.release_s = self.close_s = 0.0
        self.replaced = 0  # released sandboxes whose reset failed (retired, not reused)
        self.round_ms: list[float] = []
        self.wrong = 0
        self.pss_mb = self.machine_mb = self.host_mb = 0.0
        self.left = 0
        self.stopped_early = False

    async def run(self) -> FitRun:
        backend = LocalBackend()
        config = PoolConfig(min_idle=0, max_size=self.n, acquire_timeout=600, health_interval=600)
        async with SandboxPool(backend, config) as pool:
            available, host = available_mb(), _rss_mb()
            start = time.perf_counter()
            launching = anyio.CapacityLimiter(LAUNCHING)
            async with anyio.create_task_group() as tg:
                for i in range(self.n):
                    tg.start_soon(self._hold, pool, i, launching)
            self.up_s = time.perf_counter() - start
            if self.held:
                self.machine_mb = (available - available_mb()) / len(self.held)
                self.host_mb = (_rss_mb() - host) / len(self.held)
            self.held.sort(key=lambda held: held[0])
            ids = [sandbox.id for _, sandbox in self.held]
            processes = await anyio.to_thread.run_sync(local_processes, ids)
            self.pss_mb = mean_pss_mb(processes) if processes else 0.0
            async with anyio.create_task_group() as tg:
                for i, sandbox in self.held:
                    tg.start_soon(self._ask, i, sandbox)
            before = pool.statistics()
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _, sandbox in self.held:
                    tg.start_soon(self._release, pool, sandbox)
            while (stats := pool.statistics()).leased or stats.recycling:
                await anyio.sleep(0.05)
            self.release_s = time.perf_counter() - start
            self.replaced = stats.replacements - before.replacements
            start = time.perf_counter()
        self.close_s = time.perf_counter() - start
        self.left = sum(p.box in set(ids) for p in await anyio.to_thread.run_sync(bwrap_processes))
        return self

    async def _hold(self, pool: SandboxPool, i: int, launching: anyio.CapacityLimiter) -> None:
        async with launching:
            if available_mb() < self.floor_mb:
                self.stopped_early = True
                return
            try:
                sandbox = await pool.acquire()
            except Exception as exc:
                self.errors.append(f"acquire: {exc!r}")
                return
            self.held.append((i, sandbox))
            try:
                result = await sandbox.kernel_exec(f"x = {i}")
            except Exception as exc:
                self.errors.append(f"kernel {i}: {exc!r}")
                return
            if not result.ok:
                self.errors.append(f"kernel {i}: {result.status}")

    async def _ask(self, i: int, sandbox: Sandbox) -> None:
        start = time.perf_counter()
        try:
            result = await sandbox.kernel_exec("x")
        except Exception as exc:
            self.errors.append(f"round {i}: {exc!r}")
            self.wrong += 1
            return
        self.round_ms.append((time.perf_counter() - start) * 1000)
        if not result.ok or result.stdout.strip() != str(i):
            self.wrong += 1

    async def _release(self, pool: SandboxPool, sandbox: Sandbox) -> None:
        try:
            await pool.release(sandbox)
        except Exception as exc:
            self.errors.append(f"release: {exc!r}")

    def rows(self) -> list[Row]:
        held = len(self.held)
        what = f"local: {held} of {self.n} stateful sandboxes"
        if self.stopped_early:
            what += f" (stopped at {self.floor_mb} MB available)"
        within = sum(ms <= 1000 for ms in self.round_ms)
        return [
            Row(f"{what}, all up", self.up_s, None, "s"),
            Row(f"{what}, PSS each", self.pss_mb, None, "MB"),
            Row(f"{what}, the machine's available memory each (all in)", self.machine_mb, None, "MB"),
            Row(f"{what}, the pool's own memory each", self.host_mb, None, "MB"),
            Row(f"{what}, concurrent kernel round, slowest", max(self.round_ms, default=0.0), None, "ms"),
            Row(f"{what}, concurrent kernel round, p50", percentile(self.round_ms or [0.0], 50), None, "ms"),
            Row(f"{what}, kernels answering right within 1 s", within - self.wrong, None, "kernels"),
            Row(f"{what}, released together, all reset", self.release_s, None, "s"),
            Row(f"{what}, released together, resets failed", self.replaced, None, ""),
            Row(f"{what}, then the pool closed", self.close_s, None, "s"),
            Row(f"{what}, errors (lease, kernel, release)", len(self.errors), None, ""),
            Row(f"{what}, processes left after close", self.left, None, ""),
        ]


# --- the rows ---------------------------------------------------------------------------


async def local_rows() -> list[Row]:
    backend = LocalBackend()
    idle, stateful = await idle_and_stateful_mb(backend, local_processes)
    with bare_bwraps(backend.python, SAMPLE) as trees:
        bare = mean_pss_mb(trees)
    cold = await cold_start_ms(backend)
    python = backend.python
    steps = {
        "bwrap running true": ["bwrap", *namespace_options(os.geteuid() != 0), *system_binds(), "--", "/usr/bin/true"],
        "bwrap running python -c pass": _bwrap(python, "-c", "pass"),
        "bwrap running python importing the agent": _agent_imports(python),
    }
    starts = {name: await anyio.to_thread.run_sync(bwrap_start_ms, argv) for name, argv in steps.items()}
    fresh = percentile(starts["bwrap running python -c pass"], 50)
    rows = [
        Row("local: idle sandbox PSS", idle, bare, "MB", BARE),
        Row("local: stateful sandbox PSS (kernel holding a variable)", stateful, bare, "MB", BARE),
        Row("local: cold create-to-ready p50", percentile(cold, 50), fresh, "ms", "bwrap running python -c pass"),
    ]
    rows += [Row(f"local: start, {name} p50", percentile(samples, 50), None, "ms") for name, samples in starts.items()]
    return rows


def _agent_imports(python: str) -> list[str]:
    """bwrap running ``python`` that imports what the agent imports (as the agent does,
    without OpenSSL) and exits."""
    from gem_sandbox import agent

    code = "import sys; sys.modules['ssl'] = None; import gem_agent.server, gem_agent.config"
    argv = _bwrap(python, "-c", code)
    at = argv.index("--")
    mounts = ["--ro-bind", agent.AGENT_DIR, agent.MOUNT_POINT, "--chdir", agent.START_DIR]
    return argv[:at] + mounts + argv[at:]


async def docker_rows() -> list[Row]:
    from gem_sandbox.sandbox.backends.docker import DockerBackend
    from gem_sandbox.sandbox.backends.docker.images import default_image

    problem = DockerBackend.check()
    image = default_image()
    if problem or image is None:
        print(f"docker footprint skipped: {problem or 'no sandbox image'}")
        return []
    idle, stateful = await idle_and_stateful_mb(DockerBackend(), docker_processes)
    bare = await anyio.to_thread.run_sync(_bare_container_mb, image)
    return [
        Row("docker: idle sandbox PSS", idle, bare, "MB", BARE),
        Row("docker: stateful sandbox PSS (kernel holding a variable)", stateful, bare, "MB", BARE),
    ]


def _bare_container_mb(image: str) -> float:
    with bare_containers(image, SAMPLE) as trees:
        return mean_pss_mb(trees)


def parts(fit: int = FIT) -> list[tuple[str, Callable[[], list[Row]]]]:
    """The benchmark's parts, each a titled function returning its rows."""
    found = [("local sandbox footprint", lambda: anyio.run(local_rows))]
    if fit:
        found.append((f"{fit} stateful local sandboxes at once", lambda: anyio.run(FitRun(fit).run).rows()))
    found.append(("docker sandbox footprint", lambda: anyio.run(docker_rows)))
    return found


def run(fit: int = FIT) -> list[Row]:
    return [row for _, part in parts(fit) for row in part()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", type=int, default=FIT, help=f"stateful sandboxes to hold at once ({FIT}; 0: none)")
    options = parser.parse_args()
    for title, part in parts(options.fit):  # each table as soon as it is measured
        print_table(title, part())


if __name__ == "__main__":
    main()
