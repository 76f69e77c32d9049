"""The process backend, and the box of every sandbox that is one host process.

:class:`ProcessBackend` runs the agent as a plain host subprocess with a temporary work dir.
It is NOT a security boundary (code sees the host's filesystem and network); it exists for
development and for testing the agent where bubblewrap is unavailable. :class:`ProcessBox`
is its box, and the base of :class:`~.bwrap.BwrapBox`: a process whose stream is the agent's,
killed politely or not, whose cleanup (file system work) runs in a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable

import anyio
import anyio.to_thread
from anyio.abc import ByteStream, Process
from anyio.streams.stapled import StapledByteStream

from gem_sandbox import agent
from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.backends.uids import UidRange, claim_uid_range

log = logging.getLogger(__name__)

POLITE_EXIT = 3.0  # seconds a process-backend agent gets to kill its runs and exit
_warned = False


def sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class ProcessBox(Box):
    """A sandbox that is one host process whose stdin and stdout are the agent's stream
    (or ``stream``, when given: a socket the agent was handed).

    ``kill`` first closes stdin when ``polite`` (the agent then kills its runs and exits),
    then terminates it, and SIGKILLs it if it is still there after :data:`POLITE_EXIT`
    seconds. The sandbox's ``uids`` go back once nothing can still run as them: when the
    agent exited with status 0 (it kills every run first), or always when
    :attr:`kill_takes_all`.
    """

    kill_takes_all = False  # terminating the process kills everything the sandbox started

    def __init__(
        self,
        box_id: str,
        process: Process,
        *,
        polite: bool,
        cleanup: Callable[[], None] | None = None,
        stream: ByteStream | None = None,
        uids: UidRange | None = None,
    ) -> None:
        if stream is None:
            assert process.stdin is not None and process.stdout is not None
            stream = StapledByteStream(process.stdin, process.stdout)
        self.id = box_id
        self.process = process
        self.stream = stream
        self._polite = polite
        self._cleanup = cleanup
        self._uids = uids
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
                await self._terminate()
                await self._exited(POLITE_EXIT)
            if self.process.returncode is None:
                sigkill(self.process.pid)
            await self.stream.aclose()
            await self.process.aclose()
            if self._cleanup is not None:
                await anyio.to_thread.run_sync(self._cleanup)
            if self._uids is None:
                return
            if self.kill_takes_all or self.process.returncode == 0:
                self._uids.release()
            else:
                log.info("%s: its uids stay claimed, its runs may outlive its agent", self.id)

    async def _exited(self, patience: float) -> None:
        with anyio.move_on_after(patience):
            await self.process.wait()

    async def _terminate(self) -> None:
        sigkill(self.process.pid)

    async def exit_reason(self) -> str | None:
        code = self.process.returncode
        return None if code is None else f"the sandbox process exited with status {code}"


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
        home = await anyio.to_thread.run_sync(self._make_home)
        remove_home = functools.partial(shutil.rmtree, home, ignore_errors=True)
        as_root = os.geteuid() == 0 and self.user in (None, 0)
        uids = None
        try:
            uids = await anyio.to_thread.run_sync(claim_uid_range) if as_root else None
            command = agent.command(
                self.python,
                workdir=os.path.join(home, "work"),
                tmpdir=os.path.join(home, "tmp"),
                uid_base=uids.base if uids else None,
                uid_count=uids.count if uids else None,
                nproc=spec.pids if as_root else None,
                threads=spec.threads,
                memory_mb=spec.memory_mb,
            )
            process = await anyio.open_process(
                command,
                cwd=home,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                stderr=None,
                user=self.user,
                group=self.user,
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_home)
            if uids is not None:
                uids.release()
            raise
        box_id = f"process-{uuid.uuid4().hex[:12]}"
        return ProcessBox(box_id, process, polite=True, cleanup=remove_home, uids=uids)

    def _make_home(self) -> str:
        """A fresh dir holding the agent (a link), ``work`` and ``tmp``."""
        home = tempfile.mkdtemp(prefix="gem-sandbox-")
        try:
            os.chmod(home, 0o755)  # run uids (and a ``user`` agent) must get to what is inside
            os.symlink(agent.AGENT_DIR, os.path.join(home, "gem_agent"))
            for name in ("work", "tmp"):
                path = os.path.join(home, name)
                os.mkdir(path, 0o700)
                if self.user is not None:
                    os.chown(path, self.user, -1)
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise
        return home


def _warn_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "the process backend runs sandbox code as plain host processes: it is NOT a "
            "security boundary; use the local (bubblewrap) or docker backend for untrusted code"
        )
