"""A real Ray cluster of several nodes on one machine, each on a loopback address of its own
(127.0.0.2, 127.0.0.3, ...): for the tests, the benchmarks, and trying the Ray runtime before
there is a cluster. Each node is a ``ray start`` of its own (the head with ``--head``, the others
with ``--address``), so it has its own raylet, object store and workers, and dies as a machine
would when :meth:`LoopbackCluster.kill_node` kills its processes.

Every node binds and talks on its loopback address (given to Ray as the node's address, since
Ray would otherwise take the machine's outward one), and usage statistics are off, so the
cluster sends nothing off the machine.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

HEAD_ADDRESS = "127.0.0.2"
QUIET = {"RAY_USAGE_STATS_ENABLED": "0"}  # and no dashboard: nothing listens that need not
START_TIMEOUT = 120.0  # seconds a `ray start` may take


class LoopbackCluster:
    """``with LoopbackCluster() as cluster: cluster.add_node(); cluster.join()``

    ``cpus`` and ``object_store_bytes`` size each node (small: the sandboxes, not Ray's tasks,
    use this machine); ``resources`` are given to every node, with one more naming the node
    (``loopback_2`` for 127.0.0.2); ``system_config`` overrides Ray's settings cluster-wide
    (the head's ``--system-config``), such as how soon a silent node is declared dead."""

    def __init__(
        self,
        *,
        cpus: int = 1,
        object_store_bytes: int = 80 * 2**20,
        resources: dict[str, float] | None = None,
        system_config: dict[str, object] | None = None,
    ) -> None:
        self.cpus = cpus
        self.object_store_bytes = object_store_bytes
        self.resources = dict(resources or {})
        self.system_config = dict(system_config or {})
        self.root = Path(tempfile.mkdtemp(prefix="gr-", dir="/tmp"))  # short: unix socket paths
        self.address: str | None = None  # the head's GCS, host:port
        self.nodes: list[str] = []  # node addresses, the head's first

    def __enter__(self) -> LoopbackCluster:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> str:
        """Start the head node; its GCS address."""
        port = _free_port(HEAD_ADDRESS)
        head = ["--head", f"--port={port}", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.root}"]
        if self.system_config:
            head.append(f"--system-config={json.dumps(self.system_config)}")
        self._ray_start(HEAD_ADDRESS, *head)
        self.address = f"{HEAD_ADDRESS}:{port}"
        return self.address

    def add_node(self, address: str | None = None) -> str:
        """Start one more node (on the next free loopback address, or ``address``); its address."""
        if self.address is None:
            raise RuntimeError("start() the head first")
        address = address or f"127.0.0.{max(int(a.rsplit('.', 1)[1]) for a in self.nodes) + 1}"
        self._ray_start(address, f"--address={self.address}")
        return address

    def kill_node(self, address: str) -> None:
        """SIGKILL every process of the node at ``address`` (its raylet, workers, actors): the
        node dies as a machine that lost power would, and the head finds out by itself."""
        if address == HEAD_ADDRESS:
            raise ValueError("kill a node other than the head")
        flags = (f"--node_ip_address={address}", f"--node-ip-address={address}")
        _kill(_with_descendants(pid for pid, argv in _processes() if any(f in argv for f in flags)))
        self.nodes.remove(address)

    def join(self) -> None:
        """Make this process a driver of the cluster, on the head node."""
        import ray

        ray.init(address=self.address, _node_ip_address=HEAD_ADDRESS, logging_level=logging.WARNING, log_to_driver=False)

    def environment(self) -> dict[str, str]:
        """Variables that make another process (``gem-sandbox ray``, a script) join this cluster."""
        assert self.address is not None
        return {**QUIET, "RAY_ADDRESS": self.address}

    def stop(self) -> None:
        """Kill every process of the cluster and remove its files."""
        root = str(self.root)
        _kill(_with_descendants(pid for pid, argv in _processes() if root in argv or (self.address or "\0") in argv))
        shutil.rmtree(self.root, ignore_errors=True)
        self.nodes.clear()

    def _ray_start(self, address: str, *flags: str) -> None:
        ray = Path(sys.executable).with_name("ray")
        resources = {**self.resources, f"loopback_{address.rsplit('.', 1)[1]}": 1}
        command = [
            str(ray), "start", *flags, f"--node-ip-address={address}", f"--num-cpus={self.cpus}",
            f"--object-store-memory={self.object_store_bytes}", f"--resources={json.dumps(resources)}",
        ]  # fmt: skip
        done = subprocess.run(command, env={**os.environ, **QUIET}, capture_output=True, text=True, timeout=START_TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f"`ray start` of node {address} failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
        self.nodes.append(address)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _processes() -> list[tuple[int, str]]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found.append((int(name), argv))
    return found


def _parents() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            parents[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _with_descendants(pids: object) -> set[int]:
    found = set(pids)  # type: ignore[call-overload]
    parents = _parents()
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    found.discard(os.getpid())
    return found


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)}
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
