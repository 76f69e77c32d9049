"""Persistent processes that take one command at a time: the base of kernels and shells.

A session is forked like a run (its own tenant, a new session, limits) but stays up between
commands. Commands go in on descriptor 4, each with a sequence number (the subclass says how:
:meth:`Sessions.encode`); after each one the process writes ``<sequence> <status>`` as a line
on descriptor 3. Output read from its stdout and stderr before that line belongs to that
command (what a background job prints later shows up with the next one). A session that dies
is started afresh by the next command.

Trust: the per-command status is the session process's own report (the shell's ``$?``, a
cell that raised), since the code runs in that very process: a cell that catches its own
exception is ``ok`` by construction. What the agent guarantees is everything else: a status
line counts only for the command it names, whose number is drawn at random when it is sent (a
stale or forged line for another number is ignored, so nothing is misattributed, not even a
line a command wrote for a number it guessed in advance), the line buffer is capped, and
timeouts, kills, output limits, OOM kills and a session's death come from the agent's own
observations, as for runs.
"""

import os

from . import aio, results
from .children import Child
from .forked import exit_outcome
from .limits import Limits
from .pipes import CHUNK, Capture, PipeReader, PipeWriter
from .protocol import INTERRUPT_GRACE, Refused
from .pyexec import COMMANDS_FD, DISPLAY_FD, STATUS_FD
from .runs import Part, timeout_of
from .shown import Shown

MAX_STATUS_LINE = 64  # bytes of a status line kept while waiting for its newline
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Session:
    """One live process and its pipes."""

    def __init__(
        self, loop, pid, tenant, exited, stdout_fd, stderr_fd, command_fd, status_fd, oom, display_fd=None
    ):
        self.loop = loop
        self.oom = oom
        self.pid = pid
        self.tenant = tenant
        self.exited = exited
        self.out = self.err = Capture(0)
        self.ceiling = 0
        self.flood = aio.Event()
        self.status = None  # the future of the current command's status line
        self.seq = 0  # the current command's number: random, so none can be forged in advance
        self.interrupted = False  # a reset killed it
        self.gone = None  # once killed: whether all its processes are gone
        self.partial = b""
        self.echo = None  # the current command's output also goes here, as (fd, data)
        self.readers = [
            PipeReader(loop, stdout_fd, lambda data: self._output(self.out, data, 1)),
            PipeReader(loop, stderr_fd, lambda data: self._output(self.err, data, 2)),
            PipeReader(loop, status_fd, self._status_data),
        ]
        self.commands = PipeWriter(loop, command_fd)
        self.shown = Shown()  # display data (kernels): read from display_fd, if any
        if display_fd is not None:
            self.readers.append(PipeReader(loop, display_fd, self.shown.add))

    @property
    def alive(self):
        return not self.exited.done()

    def _output(self, capture, data, fd):
        capture.add(data)
        if self.echo is not None and capture.total <= self.ceiling:
            self.echo(fd, data)
        if capture.total > self.ceiling:
            self.flood.set()

    def _status_data(self, data):
        lines = data.split(b"\n")
        lines[0] = self.partial + lines[0]
        self.partial = lines.pop()[-MAX_STATUS_LINE:]
        for line in lines:
            seq, _, status = line.partition(b" ")
            if self.status is not None and not self.status.done() and seq == b"%d" % self.seq:
                try:
                    self.status.set_result(int(status))
                except ValueError:
                    pass

    async def execute(self, encode, timeout, limits, interrupt, terminate, echo=None):
        """Run the command ``encode(seq)`` gives. A timed-out command is stopped by
        ``interrupt(session)``; if that is not enough, or output floods,
        ``terminate(session)`` kills the session. ``echo(fd, data)`` gets its output as it
        comes, too. Returns ``(header fields, payload, whether the session survived)``."""
        self.out, self.err = Capture(limits.max_output_bytes), Capture(limits.max_output_bytes)
        self.shown.clear()
        self.ceiling = limits.output_ceiling
        self.flood.clear()
        # Unpredictable rather than counting: a command can write status lines for numbers it
        # guesses, and lines still in the pipe when the next command starts would otherwise
        # be taken as that command's status.
        self.seq = int.from_bytes(os.urandom(8), "big") >> 2  # 62 bits, as secrets would, without hashlib
        self.status = self.loop.create_future()
        cpu_before = self.cpu_ms()
        ooms_before = self.oom.count()
        started = self.loop.time()
        self.echo = echo
        self.commands.write(encode(self.seq))
        ended = await self._wait(timeout)
        duration_ms = (self.loop.time() - started) * 1000
        timed_out = ended is None
        if timed_out:
            await interrupt(self)
            ended = await self._wait(INTERRUPT_GRACE)
        survived = ended is self.status and not self.flood.is_set() and not self.interrupted
        cpu_ms = self.cpu_ms() - cpu_before
        if not survived:
            await terminate(self)
        for reader in self.readers[:2]:
            reader.drain(limits.max_output_bytes + CHUNK)
        self.echo = None
        for reader in self.readers[3:]:
            reader.drain(self.shown.cap + CHUNK)
        if ended is self.status:
            code, sig = self.status.result(), None
        elif self.exited.done():
            code, sig = exit_outcome(self.exited.result()[0])
        else:
            code, sig = None, None
        status = results.status_of(
            code,
            sig,
            timed_out=timed_out,
            flooded=self.flood.is_set(),
            interrupted=self.interrupted,
            oom_killed=self.oom.count() > ooms_before,
            truncated=self.out.truncated or self.err.truncated,
        )
        fields, payload = results.result(
            status, code, sig, self.out, self.err, duration_ms, max(cpu_ms, 0.0)
        )
        fields.update(self.shown.fields())
        return fields, payload, survived

    async def _wait(self, timeout):
        """What ended the command first (its status future, ``exited``, the flood event's
        task), or None at the timeout."""
        flooded = self.loop.create_task(self.flood.wait())
        done, _ = await aio.wait(
            [self.status, self.exited, flooded],
            timeout=timeout,
            return_when=aio.FIRST_COMPLETED,
        )
        flooded.cancel()
        for ended in (self.status, self.exited):
            if ended in done:
                return ended
        return flooded if done else None

    def cpu_ms(self):
        """CPU time of the process and its reaped children so far."""
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return sum(int(value) for value in fields[11:15]) * 1000.0 / _CLOCK_TICKS

    def close(self):
        for reader in self.readers:
            reader.close()
        self.commands.close()


class Sessions(Part):
    """Sessions by name, one command at a time each. Subclasses say what a session runs
    (:meth:`orders` for :meth:`.Child.start`) and how to interrupt a command."""

    def __init__(self, loop, config, forker, tenants, workspace, oom):
        super().__init__(loop, config, forker, tenants, workspace, oom)
        self.live = {}
        self.locks = {}
        self.resets = 0  # forget_all() calls: a session forked across one never starts

    shows = False  # whether a session has a display pipe (kernels, see shown.py)

    def orders(self):
        raise NotImplementedError

    def encode(self, seq, text, header):
        """The bytes that send command ``text`` as number ``seq`` (``header``: the request's)."""
        raise NotImplementedError

    def unsendable(self, text):
        """Why the session's program cannot take ``text`` (it then fails as the program
        would), or None."""
        return None

    async def interrupt(self, session):
        raise NotImplementedError

    def names(self):
        return sorted(name for name, session in self.live.items() if session.alive)

    async def execute(self, name, text, header, echo=None):
        if not isinstance(name, str) or not isinstance(text, str):
            raise Refused("bad_request", "session name and command must be strings")
        why = self.unsendable(text)
        if why is not None:
            return results.failed_before_start(why)
        timeout = timeout_of(header)
        limits = Limits(header.get("limits"), timeout, self.config.memory_mb, self.config.nproc)
        lock = self.locks.setdefault(name, aio.Lock())
        async with lock:
            session = self.live.get(name)
            if session is None or not session.alive:
                await self.stop(name)
                session = await self._start(limits)
                if session is None:  # a reset came while it was forked
                    return results.result("killed", None, None, Capture(0), Capture(0), 0.0, 0.0)
                self.live[name] = session
            fields, payload, survived = await session.execute(
                lambda seq: self.encode(seq, text, header),
                timeout,
                limits,
                self.interrupt,
                self._terminate,
                echo,
            )
            if not survived:
                await self.stop(name)
            return fields, payload

    async def stop(self, name):
        session = self.live.pop(name, None)
        if session is not None:
            await self._terminate(session)
            session.close()
            self.tenants.release(session.tenant, clean=session.gone)

    async def _terminate(self, session):
        if session.gone is None:
            session.gone = await self.tenants.kill(session.tenant)

    def forget_all(self):
        """After a reset killed every process: drop the sessions' pipes and tenants."""
        self.resets += 1
        for session in self.live.values():
            session.interrupted = True
            session.gone = True  # its uid may be handed out again at once: never kill by it
            session.close()
            self.tenants.release(session.tenant)
        self.live.clear()

    async def _start(self, limits):
        """A new session, started; None when a reset came while it was being forked."""
        tenant = self.tenants.acquire()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        commands_r, commands_w = os.pipe()
        status_r, status_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        fds = {0: devnull, 1: out_w, 2: err_w, STATUS_FD: status_w, COMMANDS_FD: commands_r}
        display_r = None
        if self.shows:
            display_r, fds[DISPLAY_FD] = os.pipe()
        resets = self.resets
        child = None
        try:
            child = await Child.fork(self.loop, self.forker, fds)
        finally:
            for fd in fds.values():
                os.close(fd)
            if child is None or self.resets != resets:  # failed, or forked across a reset:
                if child is not None:  # it never starts, and its uid goes back unused
                    child.discard()
                self.tenants.release(tenant)
                for fd in (out_r, err_r, commands_w, status_r, display_r):
                    if fd is not None:
                        os.close(fd)
        if self.resets != resets:
            return None
        tenant.leaders.add(child.pid)
        workdir = self.workspace.workdir
        env = self.workspace.env({}, self.tenants.environment(tenant))
        child.start(
            rlimits=limits.rlimits(cpu=False),
            uid=tenant.uid,
            gid=tenant.gid,
            cwd=workdir,
            env=env,
            **self.orders(),
        )
        return Session(
            self.loop, child.pid, tenant, child.exited, out_r, err_r, commands_w, status_r, self.oom, display_r
        )
