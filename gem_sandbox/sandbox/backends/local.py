"""Backends on this machine: the agent under bubblewrap ("local") or as a plain process.

:class:`LocalBackend` starts one ``bwrap`` per sandbox: new pid, ipc, net, uts and (where
possible) cgroup namespaces; the host's ``/usr`` read-only and a generated ``/etc/passwd``;
fresh ``/proc`` and ``/dev``; sized tmpfs for ``/work``, ``/tmp`` and ``/dev/shm``; the agent
read-only at :data:`gem_sandbox.agent.MOUNT_POINT`; no network but a loopback of its own.
As root, no user namespace is made, so the agent can give every run a real uid of its own
(each sandbox gets a distinct range, so RLIMIT_NPROC counts per sandbox) and keeps only the
capabilities it needs for that. As another user, bwrap makes a user namespace and the agent
falls back to token mode (see :mod:`gem_sandbox.agent.tenants`). ``--die-with-parent`` ties
each sandbox to the thread that launched it; :meth:`LocalBackend.reap_orphans` removes the
rare one whose owner died while it was still starting.

What bubblewrap does not bound: the sandbox's total memory and CPU (there are no cgroups
here). Each run's address space is capped by RLIMIT_AS (``spec.memory_mb`` is the ceiling),
its CPU time by RLIMIT_CPU, its processes by RLIMIT_NPROC (``spec.pids``) and its files by
the tmpfs sizes and RLIMIT_FSIZE. Use the Docker backend for hard whole-sandbox quotas.

:class:`ProcessBackend` runs the same agent as a plain host subprocess with a temporary work
dir. It is NOT a security boundary (code sees the host's filesystem and network); it exists
for development and for testing the agent where bubblewrap is unavailable.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from typing import NamedTuple

import anyio
from anyio.abc import ByteStream, Process, SocketStream
from anyio.streams.stapled import StapledByteStream

from gem_sandbox import agent
from gem_sandbox.sandbox.backends.base import (
    UIDS_PER_SANDBOX,
    Backend,
    Box,
    SandboxSpec,
    allocate_uid_base,
)

log = logging.getLogger(__name__)

MIB = 1024 * 1024
BOX_VAR = "GEM_SANDBOX_BOX"  # given to bwrap (--setenv): its argv then names the sandbox
AGENT_CAPS = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "FOWNER", "CHOWN")
POLITE_EXIT = 3.0  # seconds a process-backend agent gets to kill its runs and exit
_HOST_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_HOST_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
)


class BwrapProcess(NamedTuple):
    pid: int
    ppid: int
    box: str
    init: bool  # pid 1 of the sandbox's namespace (else: the launcher outside it)


def bwrap_processes() -> list[BwrapProcess]:
    """The host's bwrap processes of local sandboxes: each sandbox has a launcher and, as
    pid 1 of its pid namespace, an init (whose death takes the whole sandbox with it)."""
    found = []
    marker = BOX_VAR.encode()
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if marker not in argv:
                continue
            with open(f"/proc/{name}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            box = argv[argv.index(marker) + 1].decode()
            ppid, nspids = int(fields[b"PPid"]), fields[b"NSpid"].split()
        except (OSError, IndexError, KeyError, ValueError):
            continue
        found.append(BwrapProcess(int(name), ppid, box, init=len(nspids) > 1))
    return found


def _sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _threads(spec: SandboxSpec) -> int:
    return max(1, math.ceil(spec.cpus))


class ProcessBox(Box):
    """A sandbox that is one host process whose stdin and stdout are the agent's stream
    (or ``stream``, when given: a socket the agent was handed).

    ``kill`` first closes stdin when ``polite`` (the agent then kills its runs and exits),
    then terminates it, and SIGKILLs it if it is still there after :data:`POLITE_EXIT`
    seconds.
    """

    def __init__(
        self,
        box_id: str,
        process: Process,
        *,
        polite: bool,
        cleanup: Callable[[], None] | None = None,
        stream: ByteStream | None = None,
    ) -> None:
        if stream is None:
            assert process.stdin is not None and process.stdout is not None
            stream = StapledByteStream(process.stdin, process.stdout)
        self.id = box_id
        self.process = process
        self.stream = stream
        self._polite = polite
        self._cleanup = cleanup
        self._killed = False

    async def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        with anyio.CancelScope(shield=True):
            if self._polite:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await self.stream.send_eof()
                await self._exited(POLITE_EXIT)
            if self.process.returncode is None:
                self._terminate()
                await self._exited(POLITE_EXIT)
            if self.process.returncode is None:
                _sigkill(self.process.pid)
            await self.stream.aclose()
            await self.process.aclose()
            if self._cleanup is not None:
                self._cleanup()

    async def _exited(self, patience: float) -> None:
        with anyio.move_on_after(patience):
            await self.process.wait()

    def _terminate(self) -> None:
        _sigkill(self.process.pid)

    async def exit_reason(self) -> str | None:
        code = self.process.returncode
        return None if code is None else f"the sandbox process exited with status {code}"


class BwrapBox(ProcessBox):
    """SIGKILL to the pid namespace's init makes the kernel kill everything in the sandbox,
    and the launcher exits only after that: ``kill`` returns with nothing left. A launcher
    killed while it was still starting the sandbox can leave an init behind, blocked before
    it could arm ``--die-with-parent``; the final sweep kills it. A rootless sandbox has no
    bwrap init (the agent is pid 1): killing the launcher takes the agent, and with it the
    whole pid namespace, down through ``--die-with-parent``."""

    def __init__(self, box_id: str, process: Process, stream: ByteStream) -> None:
        super().__init__(box_id, process, polite=False, cleanup=self._sweep, stream=stream)

    def _terminate(self) -> None:
        inits = [p.pid for p in bwrap_processes() if p.box == self.id and p.init]
        for pid in inits or [self.process.pid]:
            _sigkill(pid)

    def _sweep(self) -> None:
        for leftover in bwrap_processes():
            if leftover.box == self.id:
                _sigkill(leftover.pid)


class LocalBackend(Backend):
    """Sandboxes under bubblewrap on this machine (see the module docstring)."""

    name = "local"

    def __init__(
        self, *, python: str | None = None, bwrap: str = "bwrap", user: int | None = None
    ) -> None:
        """``python`` runs the agent inside the sandbox: by default ``/usr/bin/python3``,
        else this interpreter, whose installation is then mounted read-only. ``user`` starts
        bubblewrap as that uid (and gid) instead of as ourselves: a root process can run
        rootless sandboxes this way."""
        if python is None:
            python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        self.python = python
        self.bwrap = shutil.which(bwrap) or bwrap
        self.user = user

    @property
    def rootless(self) -> bool:
        """bubblewrap runs unprivileged, in a user namespace: runs share the agent's uid."""
        return os.geteuid() != 0 or self.user not in (None, 0)

    @classmethod
    def check(cls) -> str | None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return "bubblewrap is not installed; install it with: apt-get install bubblewrap"
        probe = [bwrap, *_namespace_options(os.geteuid() != 0), *_system_binds()]
        probe += ["--", "/usr/bin/true"]
        try:
            done = subprocess.run(probe, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap could not be run: {exc}"
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip()
            return (
                f"bwrap cannot create a sandbox here ({why}); it needs root or unprivileged "
                "user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
            )
        return None

    async def launch(self, spec: SandboxSpec) -> Box:
        """Start ``bwrap`` and the agent in it (``spec.image`` is ignored: the sandbox runs
        the host's ``/usr``).

        The agent's stream is a socket it gets as an extra descriptor, and its log a dup of
        our stderr, also extra; bwrap's own stdio is ``/dev/null``. bwrap's init (pid 1 in
        the sandbox) keeps its stdio but closes every other descriptor, so nothing in the
        sandbox holds the protocol but the agent: rootless runs share the init's uid and
        could otherwise open ``/proc/1/fd/*``."""
        root = not self.rootless
        uid_base = allocate_uid_base() if root else None
        ids = (
            range(uid_base, uid_base + UIDS_PER_SANDBOX) if uid_base is not None else [os.getuid()]
        )
        gid = uid_base if uid_base is not None else os.getgid()
        data_fds: list[int] = []
        options = [*_namespace_options(self.rootless), *_system_binds()]
        ours, theirs = socket.socketpair()
        log_fd = os.dup(2)
        try:
            for dest, content in _generated_etc(ids, gid).items():
                read_end, write_end = os.pipe()
                data_fds.append(read_end)
                os.write(write_end, content.encode())
                os.close(write_end)
                options += ["--perms", "0644", "--ro-bind-data", str(read_end), dest]
            options += self._sandbox_options(spec)
            command = agent.command(
                self.python,
                workdir="/work",
                tmpdir="/tmp",
                scratch=["/dev/shm", "/dev/mqueue"],
                uid_base=uid_base,
                uid_count=UIDS_PER_SANDBOX if root else None,
                # Per sandbox either way: its own uid range, or (rootless) its own user
                # namespace, in which the kernel counts a uid's processes apart.
                nproc=spec.pids,
                threads=_threads(spec),
                memory_mb=spec.memory_mb,
                stream_fd=theirs.fileno(),
                log_fd=log_fd,
            )
            box_id = f"local-{uuid.uuid4().hex[:12]}"
            options += ["--setenv", BOX_VAR, box_id]
            process = await anyio.open_process(
                [self.bwrap, *options, "--", *command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[*data_fds, theirs.fileno(), log_fd],
                user=self.user,
                group=self.user,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            for fd in [*data_fds, log_fd]:
                os.close(fd)
            theirs.close()
        return BwrapBox(box_id, process, await SocketStream.from_socket(ours))

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        """Kill sandbox inits whose launcher is gone: what is left when an owner died while
        its sandbox was still starting (a started sandbox dies with its owner). Sandboxes
        have no labels here, so ``pool_label`` is not used."""
        found = bwrap_processes()
        launchers = {(p.pid, p.box) for p in found if not p.init}
        orphans = [p.pid for p in found if p.init and (p.ppid, p.box) not in launchers]
        for pid in orphans:
            _sigkill(pid)
        return len(orphans)

    def _sandbox_options(self, spec: SandboxSpec) -> list[str]:
        options = []
        python_home = os.path.dirname(os.path.dirname(os.path.realpath(self.python)))
        if not python_home.startswith("/usr"):
            options += ["--ro-bind", python_home, python_home]
        for size_mb, mode, path in (
            (spec.tmp_mb, "1777", "/tmp"),
            (spec.tmp_mb, "1777", "/dev/shm"),
            (spec.workdir_mb, "0755", "/work"),
        ):
            options += ["--size", str(size_mb * MIB), "--perms", mode, "--tmpfs", path]
        options += ["--mqueue", "/dev/mqueue"]  # POSIX queues, listed and emptied on reset
        options += ["--ro-bind", agent.AGENT_DIR, agent.MOUNT_POINT, "--chdir", agent.START_DIR]
        options += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
        options += ["--setenv", "LANG", "C.UTF-8"]
        return options


def _namespace_options(rootless: bool) -> list[str]:
    options = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
    ]
    if not rootless:
        # No user namespace: real uids, so the agent can run each run as its own.
        options += ["--cap-drop", "ALL"]
        for cap in AGENT_CAPS:
            options += ["--cap-add", f"CAP_{cap}"]
    else:
        # Runs share the agent's uid: as pid 1 of the sandbox (no bwrap init) the kernel
        # keeps their signals from it (see gem_sandbox.agent.server.serve).
        options += ["--unshare-user", "--disable-userns", "--as-pid-1"]
    return options


def _system_binds() -> list[str]:
    options = ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
    for path in ("/etc", "/opt", agent.START_DIR):  # bwrap would make missing parents 0700
        options += ["--perms", "0755", "--dir", path]
    for path in _HOST_LINKS:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    for path in _HOST_ETC:
        options += ["--ro-bind-try", path, path]
    return options


def _generated_etc(uids: range | list[int], gid: int) -> dict[str, str]:
    """``/etc`` files naming the sandbox's users, so ``whoami`` and ``getpass`` work."""
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
    users += [f"sandbox:x:{uid}:{gid}:sandbox:/work:/bin/bash" for uid in uids if uid != 0]
    users.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
    groups = ["root:x:0:", f"sandbox:x:{gid}:", "nogroup:x:65534:"]
    return {
        "/etc/passwd": "\n".join(users) + "\n",
        "/etc/group": "\n".join(groups) + "\n",
        "/etc/hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    }


_warned = False


class ProcessBackend(Backend):
    """The agent as a plain host subprocess. NOT a security boundary: code runs on the host
    with the host's filesystem and network, only under rlimits, its own uid when this
    process is root, and a kill that finds what it started. For development and tests."""

    name = "process"

    def __init__(self, *, python: str = sys.executable, user: int | None = None) -> None:
        """``user``: run the agent as this uid (and its gid) instead of as ourselves; a
        non-root agent uses token mode."""
        self.python = python
        self.user = user

    @classmethod
    def check(cls) -> str | None:
        return None if sys.platform.startswith("linux") else "the agent needs Linux (/proc, fork)"

    async def launch(self, spec: SandboxSpec) -> Box:
        _warn_once()
        home = tempfile.mkdtemp(prefix="gem-sandbox-")
        os.chmod(home, 0o755)  # run uids (and a ``user`` agent) must get to what is inside
        os.symlink(agent.AGENT_DIR, os.path.join(home, "gem_agent"))
        workdir, tmpdir = os.path.join(home, "work"), os.path.join(home, "tmp")
        as_root = os.geteuid() == 0 and self.user in (None, 0)
        for path in (workdir, tmpdir):
            os.mkdir(path, 0o700)
            if self.user is not None:
                os.chown(path, self.user, -1)
        uid_base = allocate_uid_base() if as_root else None
        command = agent.command(
            self.python,
            workdir=workdir,
            tmpdir=tmpdir,
            uid_base=uid_base,
            uid_count=UIDS_PER_SANDBOX if as_root else None,
            nproc=spec.pids if as_root else None,
            threads=_threads(spec),
            memory_mb=spec.memory_mb,
        )
        try:
            process = await anyio.open_process(
                command,
                cwd=home,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                stderr=None,
                user=self.user,
                group=self.user,
            )
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise
        return ProcessBox(
            f"process-{uuid.uuid4().hex[:12]}",
            process,
            polite=True,
            cleanup=lambda: shutil.rmtree(home, ignore_errors=True),
        )


def _warn_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "the process backend runs sandbox code as plain host processes: it is NOT a "
            "security boundary; use the local (bubblewrap) or docker backend for untrusted code"
        )
