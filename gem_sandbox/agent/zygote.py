"""The fork server: a small root process that forks every run, kernel and shell of the agent.

Why not fork from the agent itself: a fork copies the parent's page tables and an exit tears
the child's down, both in proportion to the parent's memory. The agent's heap (its event
loop, buffers, what past tenants printed) made a trivial run cost milliseconds more than it
need, and a run's memory was a copy of that heap. The zygote is forked by ``python -m
gem_agent`` before the agent imports its event loop and holds nothing of any tenant: it
imports what a child needs (:mod:`.forked`), assembles the seccomp filter once, and then only
forks, reaps and reports, on a core of its own while the agent serves the protocol.

Wire: one ``SOCK_SEQPACKET`` socket pair, a message per packet. The agent sends ``F`` with
a ``marshal``'d list of target descriptors and the sources (``SCM_RIGHTS``) in the same
order, the last being the child's orders pipe. The zygote answers each in order with
``F<pid>`` or ``E<errno>``, and reports each of its children's ends as ``X<pid, wait status,
user and system CPU seconds>``: the kernel's own wait status, read where no run can write.

Used when the agent gives each tenant its own uid (uid mode): nothing a run does can then
signal or trace the zygote, so its death is the infrastructure's failure and the agent stops
with it. In token mode runs share the agent's uid and could kill a zygote, which would turn
their own doing into ``infra_error``; there the agent forks its children itself
(:class:`DirectForker`; under rootless bubblewrap it is the sandbox's pid 1, which no run
can signal).
"""

import _signal as signal
import _socket as socket
import errno
import marshal
import os
import select
import struct

from . import forked, linux

_EXITED = struct.Struct("=iidd")  # pid, wait status, user and system CPU seconds
_PID = struct.Struct("=i")
_MAX_FDS = 8


class ForkFailed(BlockingIOError):
    """The kernel refused the fork for want of room (the pids limit, memory): a run's own
    doing, retried and then reported as its failure to start."""


def _born(pid, reaper, tenants):
    """Watch a new child's exit, and tell ``tenants`` it runs no user code until started."""
    exited = reaper.watch(pid)
    tenants.born(pid, exited)
    return pid, exited


class DirectForker:
    """Forks children from the agent itself (token mode)."""

    def __init__(self, reaper, tenants):
        self.reaper = reaper
        self.tenants = tenants

    async def fork(self, fds, control_r):
        """``(pid, exited)`` of a new child prepared with ``fds`` (see
        :func:`.forked.prepared_child`); ``exited`` resolves to ``(wait status, rusage)``."""
        try:
            pid = os.fork()
        except OSError as exc:
            raise ForkFailed(exc.errno or errno.EAGAIN, str(exc)) from None
        if pid == 0:
            forked.prepared_child(fds, control_r)  # never returns
        return _born(pid, self.reaper, self.tenants)

    def close(self):
        pass


class Zygote:
    """The agent's handle on its fork server; :func:`start` makes one."""

    def __init__(self, pid, sock):
        self.pid = pid
        self.sock = sock
        self.loop = self.reaper = self.tenants = self.on_death = None
        self.waiting = []  # futures of forks asked for, answered in order

    def attach(self, loop, reaper, tenants, on_death):
        """Serve replies and reports on ``loop``; ``on_death`` is called if the zygote dies."""
        self.loop, self.reaper, self.tenants, self.on_death = loop, reaper, tenants, on_death
        tenants.exempt.add(self.pid)
        tenants.zygote = self.pid
        reaper.watch(self.pid).add_done_callback(lambda _: self._died("it exited"))
        self.sock.setblocking(False)
        loop.add_reader(self.sock.fileno(), self._readable)

    async def fork(self, fds, control_r):
        """As :meth:`DirectForker.fork`, done by the zygote."""
        if self.sock.fileno() < 0:
            raise ForkFailed(errno.EAGAIN, "the fork server is gone")
        targets = sorted(fds)
        sources = [fds[t] for t in targets] + [control_r]
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(sources), *sources))]
        future = self.loop.create_future()
        self.waiting.append(future)
        self.sock.sendmsg([b"F" + marshal.dumps(targets)], rights)
        return await future

    def _readable(self):
        while True:
            try:
                message = self.sock.recv(64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                message = b""
            if not message:
                self._died("its socket closed")
                return
            kind, body = message[:1], message[1:]
            if kind == b"X":
                pid, status, user, system = _EXITED.unpack(body)
                self.reaper.resolve(pid, status, _Usage(user, system))
                continue
            future = self.waiting.pop(0)
            (value,) = _PID.unpack(body)
            if kind == b"F":  # watched here, before any later report of its exit is read
                born = _born(value, self.reaper, self.tenants)
                if future.done():
                    continue
                future.set_result(born)
            elif not future.done():
                future.set_exception(ForkFailed(value, os.strerror(value)))

    def _died(self, how):
        if self.sock.fileno() < 0:
            return
        self.close()
        for future in self.waiting:
            if not future.done():
                future.set_exception(ForkFailed(errno.EAGAIN, "the fork server died"))
        self.waiting = []
        self.on_death("the fork server died: %s" % how)

    def close(self):
        if self.sock.fileno() >= 0:
            if self.loop is not None:
                self.loop.remove_reader(self.sock.fileno())
            self.sock.close()


class _Usage:
    """The part of a ``struct rusage`` the agent reads."""

    __slots__ = ("ru_utime", "ru_stime")

    def __init__(self, user, system):
        self.ru_utime, self.ru_stime = user, system


def start():
    """Fork the zygote and return its :class:`Zygote`. Call it before importing anything
    large: the zygote keeps what the process held at this point."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET, 0)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            ours.close()
            _serve(theirs)
            status = 0
        finally:
            os._exit(status)
    theirs.close()
    return Zygote(pid, ours)


# --- what runs in the zygote ------------------------------------------------------------


def _serve(sock):
    """Fork on request and report exits until the agent hangs up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    linux.set_not_dumpable()
    linux.limit_malloc_arenas(2)
    linux.seccomp_program()  # assembled once, inherited by every child
    _keep_only(sock.fileno(), 2)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready = select.select([sock, wake_r], [], [])[0]
        if wake_r in ready:
            os.read(wake_r, 512)
            _report_exits(sock)
        if sock in ready:
            message, fds = _receive(sock)
            if not message:
                return
            _fork(sock, marshal.loads(message[1:]), fds)


def _receive(sock):
    space = socket.CMSG_SPACE(_MAX_FDS * 4)
    message, ancillary, _, _ = sock.recvmsg(4096, space, socket.MSG_CMSG_CLOEXEC)
    fds = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += struct.unpack("%di" % (len(data) // 4), data[: len(data) - len(data) % 4])
    return message, fds


def _fork(sock, targets, fds):
    try:
        pid = os.fork()
    except OSError as exc:
        reply = b"E" + _PID.pack(exc.errno or errno.EAGAIN)
    else:
        if pid == 0:
            forked.prepared_child(dict(zip(targets, fds)), fds[-1])  # never returns
        reply = b"F" + _PID.pack(pid)
    finally:
        for fd in fds:
            os.close(fd)
    sock.send(reply)


def _report_exits(sock):
    for pid, status, usage in forked.reaped():
        sock.send(b"X" + _EXITED.pack(pid, status, usage.ru_utime, usage.ru_stime))


def _keep_only(*keep):
    """Close every inherited descriptor but ``keep`` (the agent's protocol stream above all),
    with ``/dev/null`` on 0 and 1."""
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        if fd not in keep and fd != null:
            os.dup2(null, fd)
    if null not in (0, 1) + keep:
        os.close(null)
