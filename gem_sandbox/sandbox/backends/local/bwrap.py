"""The local backend: starting one ``bwrap`` per sandbox with the agent in it, and killing it.

What the sandbox sees is built in :mod:`.argv`; this module owns the processes: the launch
(descriptors handed to the agent, its uid range), the kill that leaves nothing behind, and
the reaping of inits whose launcher died. Process table scans run in worker threads.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid

import anyio
import anyio.to_thread
from anyio.abc import ByteStream, Process, SocketStream

from gem_sandbox import agent
from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.backends.local import argv
from gem_sandbox.sandbox.backends.local.process import ProcessBox, sigkill
from gem_sandbox.sandbox.backends.local.scan import BOX_VAR, bwrap_processes
from gem_sandbox.sandbox.backends.local.spawn import start_process
from gem_sandbox.sandbox.backends.uids import UidRange, claim_uid_range


class BwrapBox(ProcessBox):
    """SIGKILL to the pid namespace's init makes the kernel kill everything in the sandbox,
    and the launcher exits only after that: ``kill`` returns with nothing left. A launcher
    killed while it was still starting the sandbox can leave an init behind, blocked before
    it could arm ``--die-with-parent``; the final sweep kills it. A rootless sandbox has no
    bwrap init (the agent is pid 1): killing the launcher takes the agent, and with it the
    whole pid namespace, down through ``--die-with-parent``."""

    kill_takes_all = True

    def __init__(
        self, box_id: str, process: Process, stream: ByteStream, uids: UidRange | None = None
    ) -> None:
        super().__init__(
            box_id, process, polite=False, cleanup=self._sweep, stream=stream, uids=uids
        )

    async def _terminate(self) -> None:
        found = await anyio.to_thread.run_sync(bwrap_processes)
        inits = [p.pid for p in found if p.box == self.id and p.init]
        for pid in inits or [self.process.pid]:
            sigkill(pid)

    def _sweep(self) -> None:
        """Runs in a worker thread (see :meth:`ProcessBox.kill`)."""
        for leftover in bwrap_processes():
            if leftover.box == self.id:
                sigkill(leftover.pid)


class LocalBackend(Backend):
    """Sandboxes under bubblewrap on this machine (see the package docstring)."""

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
        probe = [bwrap, *argv.namespace_options(os.geteuid() != 0), *argv.system_binds()]
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
        the host's ``/usr``). As root, the sandbox gets a uid range of its own, released
        when its box is killed."""
        if self.python not in _compiled:
            await anyio.to_thread.run_sync(compile_agent, self.python)
        uids = None if self.rootless else await anyio.to_thread.run_sync(claim_uid_range)
        try:
            return await self._launch(spec, uids)
        except BaseException:
            if uids is not None:
                uids.release()  # no process was started
            raise

    async def _launch(self, spec: SandboxSpec, uids: UidRange | None) -> BwrapBox:
        """The agent's stream is a socket it gets as an extra descriptor, and its log a dup of
        our stderr, also extra; bwrap's own stdio is ``/dev/null``. bwrap's init (pid 1 in
        the sandbox) keeps its stdio but closes every other descriptor, so nothing in the
        sandbox holds the protocol but the agent: rootless runs share the init's uid and
        could otherwise open ``/proc/1/fd/*``."""
        ids = range(uids.base, uids.base + uids.count) if uids else [os.getuid()]
        gid = uids.base if uids else os.getgid()
        options, own_options = await anyio.to_thread.run_sync(self._view, spec)
        ours, theirs = socket.socketpair()
        try:
            stream = await SocketStream.from_socket(ours)
        except BaseException:
            ours.close()
            theirs.close()
            raise
        data_fds: list[int] = []
        log_fd = os.dup(2)
        try:
            for dest, content in argv.generated_etc(ids, gid).items():
                read_end, write_end = os.pipe()
                data_fds.append(read_end)
                os.write(write_end, content.encode())  # a few KiB: within the pipe's buffer
                os.close(write_end)
                options += ["--perms", "0644", "--ro-bind-data", str(read_end), dest]
            options += own_options
            command = agent.command(
                self.python,
                workdir="/work",
                tmpdir="/tmp",
                scratch=agent.SCRATCH_DIRS,
                uid_base=uids.base if uids else None,
                uid_count=uids.count if uids else None,
                # Per sandbox either way: its own uid range, or (rootless) its own user
                # namespace, in which the kernel counts a uid's processes apart.
                nproc=spec.pids,
                threads=spec.threads,
                memory_mb=spec.memory_mb,
                stream_fd=theirs.fileno(),
                log_fd=log_fd,
            )
            box_id = f"local-{uuid.uuid4().hex[:12]}"
            options += ["--setenv", BOX_VAR, box_id]
            process = await start_process(
                [self.bwrap, *options, "--", *command],
                pass_fds=[*data_fds, theirs.fileno(), log_fd],
                user=self.user,
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            raise
        finally:
            for fd in [*data_fds, log_fd]:
                os.close(fd)
            theirs.close()
        return BwrapBox(box_id, process, stream, uids)

    def _view(self, spec: SandboxSpec) -> tuple[list[str], list[str]]:
        """What the sandbox sees but ``/etc``'s generated files, which go between the two:
        namespaces and the host's binds, then the sandbox's own mounts. Reads the host's
        file system layout, so it runs in a worker thread."""
        host = [*argv.namespace_options(self.rootless), *argv.system_binds()]
        return host, argv.sandbox_options(spec, self.python)

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        """Kill sandbox inits whose launcher is gone: what is left when an owner died while
        its sandbox was still starting (a started sandbox dies with its owner). Sandboxes
        have no labels here, so ``pool_label`` is not used."""
        return await anyio.to_thread.run_sync(_reap)


_compiled: set[str] = set()


def compile_agent(python: str) -> None:
    """Bring the agent's bytecode up to date for ``python``, once per interpreter and
    process. Sandboxes mount the agent read-only: where a ``.pyc`` is stale or missing, every
    sandbox's start would compile the module again, and throw the result away (tens of ms
    each). Best effort: a read-only installation keeps what it has."""
    if python in _compiled:
        return
    _compiled.add(python)
    command = [python, "-m", "compileall", "-q", agent.AGENT_DIR]
    try:
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _reap() -> int:
    found = bwrap_processes()
    launchers = {(p.pid, p.box) for p in found if not p.init}
    orphans = [p.pid for p in found if p.init and (p.ppid, p.box) not in launchers]
    for pid in orphans:
        sigkill(pid)
    return len(orphans)
