"""Starting a sandbox's launcher and learning when it exits, without a thread per child.

``anyio.open_process`` on asyncio (Python 3.11's default child watcher) starts a thread per
child, blocked in ``waitpid`` for its whole life: 2,000 sandboxes are 2,000 threads, and
starting each one stalls the event loop until the new thread runs, which on a busy host is
milliseconds per launch. Here the exit is watched through a pidfd (Linux 5.3) that the event
loop polls like any descriptor, and the child is reaped once it has exited.

The launch itself stays in the event loop's thread: bwrap's ``--die-with-parent`` ties a
sandbox to the thread that started it, and worker threads come and go. Where the kernel has
no pidfds (before Linux 5.3), :func:`start_process` falls back to ``anyio.open_process``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process


def _pidfds_work() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


PIDFDS = _pidfds_work()


async def start_process(argv: Sequence[str], *, pass_fds: Sequence[int], user: int | None) -> Process:
    """``argv`` with stdio on ``/dev/null``, ``pass_fds`` inherited, as ``user`` (and that
    group) when given; watched through a pidfd where the kernel has them."""
    if PIDFDS:
        return WatchedProcess.start(argv, pass_fds=pass_fds, user=user)
    return await anyio.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=pass_fds,
        user=user,
        group=user,
    )


class WatchedProcess(Process):
    """A child without pipes (its stdio is elsewhere), watched through its pidfd."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._pidfd = os.pidfd_open(popen.pid)

    @classmethod
    def start(cls, argv: Sequence[str], *, pass_fds: Sequence[int], user: int | None) -> WatchedProcess:
        """As :func:`start_process`, where pidfds work."""
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=pass_fds,
            user=user,
            group=user,
        )
        try:
            return cls(popen)
        except BaseException:
            popen.kill()
            popen.wait()
            raise

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()  # reaps it once it has exited

    async def wait(self) -> int:
        while (code := self._popen.poll()) is None:
            await anyio.wait_readable(self._pidfd)  # readable from its exit on
        return code

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: int) -> None:
        if self._popen.poll() is None:
            signal.pidfd_send_signal(self._pidfd, sig)  # never a recycled pid

    @property
    def stdin(self) -> ByteSendStream | None:
        return None

    @property
    def stdout(self) -> ByteReceiveStream | None:
        return None

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return None

    async def aclose(self) -> None:
        """Wait for the exit (as anyio's processes do), then let the pidfd go."""
        with anyio.CancelScope(shield=True):
            await self.wait()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
