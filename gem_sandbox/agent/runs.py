"""The ``run`` and ``spawn`` ops: one program in a fresh child of its own tenant, watched
until it ends.

A run ends when its main process has exited (output its leftovers still write is collected for
up to ``LINGER`` seconds, so a forgotten background job cannot hold the run open until its
deadline), when its deadline passes, or when it floods past the output ceiling. Then every
process of its tenant is killed, so nothing it started outlives it, and its uid goes back to
the pool.

A spawned program is a run whose output is sent as it comes (:class:`Stream`) instead of
captured, whose stdin stays open for ``process_input``, which ``process_signal`` can signal,
and which may have no deadline. Its verdict comes from the same observations as a run's.
"""

import os
import signal

from . import aio, children, languages, results
from .children import Child
from .forked import exit_outcome
from .limits import Limits
from .pipes import Capture, Count, PipeReader, PipeWriter
from .protocol import COMPILE_TIMEOUT, Refused, text_bytes
from .zygote import ForkFailed

NO_ROOM = "gem-sandbox: the sandbox's process limit is full; the run could not start"

SETTLE = 1.0  # seconds for pipes and exit statuses to settle after the final kill
LINGER = 0.1  # seconds to keep reading output after the main process exited
FORK_RETRY = 2.0  # seconds to retry a fork that failed for want of a free process slot


def timeout_of(header, default=10.0, key="timeout"):
    timeout = header.get(key)
    if timeout is None:
        return default
    if not isinstance(timeout, (int, float)) or not 0 < timeout < 86400:
        raise Refused("bad_request", "%s must be a positive number of seconds" % key)
    return float(timeout)


class Part:
    """What the server hands each part that forks children (the runner, the sessions): its
    loop, config, forker, uid tenants, workspace and oom counter."""

    def __init__(self, loop, config, forker, tenants, workspace, oom):
        self.loop = loop
        self.oom = oom
        self.config = config
        self.forker = forker
        self.tenants = tenants
        self.workspace = workspace


class Runner(Part):
    """Runs programs; keeps one child prepared ahead (see :mod:`.children`)."""

    def __init__(self, loop, config, forker, tenants, workspace, oom, programs):
        super().__init__(loop, config, forker, tenants, workspace, oom)
        self.programs = programs  # {"bash": "/usr/bin/bash", "g++": ...}: languages.find_programs
        self.languages = languages.served(programs)
        self.spare = None  # the task preparing a child for the next run
        self.stopped = False
        self.runs_total = 0
        self.generation = 0  # bumped by a reset: runs it killed report "killed"
        self.processes = {}  # spawn request id -> its Stream, while the program runs

    async def run(self, header, stdin):
        return await self._run(header, stdin, None)

    async def spawn(self, header, stdin, emit):
        """``run``, streamed through ``emit(fields, payload)`` (see :class:`Stream`)."""
        if header.get("shared"):
            raise Refused("bad_request", "a spawned program cannot be shared")
        size = header.get("pty")
        if size is not None and not (
            isinstance(size, list) and len(size) == 2 and all(isinstance(n, int) and 0 < n < 1 << 16 for n in size)
        ):
            raise Refused("bad_request", "pty must be [rows, cols]")
        stream = Stream(self.processes, self.tenants, header["id"], emit, header.get("stdin_open"), size)
        return await self._run(header, stdin, stream)

    def process(self, header):
        """The spawned program a ``process_input`` or ``process_signal`` names."""
        stream = self.processes.get(header.get("process"))
        if stream is None:
            raise Refused("no_process", "no running process %r" % header.get("process"))
        return stream

    async def _run(self, header, stdin, stream):
        language = header.get("language", "python")
        if language not in self.languages:
            why = languages.why_not(language, self.programs)
            raise Refused("unsupported_language", "%s; it has %s" % (why, ", ".join(self.languages)))
        code = header.get("code")
        if not isinstance(code, str):
            raise Refused("bad_request", "code must be a string")
        timeout = None if stream and header.get("timeout") is None else timeout_of(header)
        limits = Limits(header.get("limits"), timeout or 0, self.config.memory_mb, self.config.nproc)
        compile_timeout = timeout_of(header, COMPILE_TIMEOUT, key="compile_timeout")
        shared = bool(header.get("shared"))
        if shared and (header.get("cwd") or not self.tenants.uid_mode):
            raise Refused("bad_request", "a shared run needs uid mode and takes no cwd")
        cwd = None if shared else self.workspace.resolve_cwd(header.get("cwd"))
        tenant = self.tenants.acquire(own_group=shared)
        scratch = os.path.join(self.workspace.tmpdir, ".gem-run-" + tenant.token)
        gone = home = None
        try:
            env = self.workspace.env(header.get("env"), self.tenants.environment(tenant))
            compiling, orders, extra = self._orders(language, code, scratch, limits.memory_mb)
            env.update(extra)
            orders["env"] = env
            if shared:  # alone in a dir of its own, and what it makes is its own
                try:
                    home = cwd = self.workspace.private_dir(tenant)
                except OSError as exc:  # /tmp is full: what the runs beside it put there
                    why = "gem-sandbox: the run's own dir could not be made: %s" % exc.strerror
                    return results.failed_before_start(why, exit_code=None)
                env.update(HOME=home, TMPDIR=home)
                orders["umask"] = 0o077
            orders["cwd"] = cwd
            self.runs_total += 1
            compiled = None
            if isinstance(compiling, str):  # the code cannot be compiled (no class to run)
                fields, payload = results.failed_before_start(compiling, exit_code=1)
                return dict(fields, compile=_phase(fields, payload)), payload
            if compiling is not None:  # a phase of its own, under its own deadline and limits
                compiling = dict(compiling, env=env, cwd=cwd, umask=orders.get("umask", 0o002))
                phase_limits = Limits(
                    header.get("limits"), compile_timeout, self.config.memory_mb, self.config.nproc
                )
                fields, payload, gone = await self._watch(
                    compiling, tenant, phase_limits, None, compile_timeout, None
                )
                compiled = _phase(fields, payload)
                if fields["status"] != "ok":  # not run: the compiler's verdict is the answer
                    return dict(fields, compile=compiled), payload
            given = stdin if header.get("stdin") else None
            fields, payload, gone = await self._watch(orders, tenant, limits, given, timeout, stream)
            if compiled is not None:
                fields["compile"] = compiled
            return fields, payload
        finally:
            if gone is None:
                gone = await self.tenants.kill(tenant)
            # Its writers are dead (or its uid is held back, and reset empties /tmp). A
            # removal that takes long goes on after the verdict, the uid held back till then.
            left = [scratch] * (language != "python") + [home] * (home is not None)
            swept = await self.workspace.sweep(left)
            self.tenants.release(tenant, clean=gone and swept)
            self.loop.call_soon(self.prepare_spare)

    def prepare_spare(self):
        if self.spare is None and not self.stopped:
            self.spare = self.loop.create_task(_Prepared.fork(self.loop, self.forker))

    def discard_spare(self):
        self.stopped = True
        spare, self.spare = self.spare, None
        if spare is not None:
            spare.cancel()  # a fork still on its way is undone (its orders pipe closes)
            if spare.done() and not spare.cancelled() and spare.exception() is None:
                spare.result().discard()

    async def _take_child(self, size=None):
        """A prepared child: the spare, or a new one (always, for a pty of ``size``)."""
        spare, self.spare = (self.spare, None) if size is None else (None, self.spare)
        if spare is not None:
            try:
                prepared = await spare
            except ForkFailed:  # the process limit was full; fork again below
                prepared = None
            if prepared is not None:
                if not prepared.child.exited.done():
                    return prepared
                prepared.discard()
        # Processes of other runs of this tenant may fill the pids limit for a moment: a
        # failed fork is retried before the run fails. None when there is still no room.
        deadline = self.loop.time() + FORK_RETRY
        while True:
            try:
                return await _Prepared.fork(self.loop, self.forker, size)
            except ForkFailed:
                if self.loop.time() > deadline:
                    return None
                await aio.sleep(0.02)

    def _orders(self, language, code, scratch, memory_mb):
        """``(compile phase, run, environment)``: the compile phase's orders (None when the
        language has none, a message when the code cannot be compiled), the run's orders
        and the language's additions to the environment. The sources go into ``scratch``
        with the first phase."""
        if language == "python":
            return None, {"program": "python", "code": code}, {}
        planned = languages.TABLE[language].orders(code, scratch, self.programs, memory_mb)
        if isinstance(planned, str):
            return planned, {}, {}
        sources, compile_argv, prepare, run_argv, env = planned
        first = {"program": "exec", "scratch": scratch}
        first["files"] = dict((name, text_bytes(text)) for name, text in sources.items())
        run = {"program": "exec", "argv": run_argv, "before": prepare}
        if compile_argv is None:
            return None, dict(first, **run), env
        return dict(first, argv=compile_argv), run, env

    async def _watch(self, orders, tenant, limits, stdin, timeout, stream):
        """Start the child and watch it until it ends (``timeout`` None: no deadline). The
        verdict comes from what the kernel and the agent observe: the main process's wait
        status and rusage, the agent's own deadline, output ceiling and reset, the cgroup's
        OOM-kill count; never from anything the run writes. A ``stream``'s output goes out
        as it comes, so only its byte counts are kept and no ceiling applies."""
        loop = self.loop
        generation = self.generation
        if stream:
            out, err = Count(), Count()
        else:
            out, err = Capture(limits.max_output_bytes), Capture(limits.max_output_bytes)
        flood = aio.Event()

        def sink(capture, fd):
            def on_data(data):
                capture.add(data)
                if stream:
                    stream.output(fd, data)
                elif capture.total > limits.output_ceiling:
                    flood.set()

            return on_data

        size = stream.size if stream else None
        prepared = await self._take_child(size)
        if generation != self.generation:  # a reset came while the child was forked: a run
            if prepared is not None:  # of the last tenant never starts in the next one's time
                prepared.discard()
            fields, payload = results.result("killed", None, None, out, err, 0.0, 0.0)
            return fields, payload, True
        if prepared is None:  # only this lease's code runs here: the code's own doing
            fields, payload = results.failed_before_start(NO_ROOM, exit_code=None)
            return fields, payload, True
        child = prepared.child
        tenant.leaders.add(child.pid)
        readers = [
            PipeReader(loop, prepared.stdout, sink(out, 1)),
            PipeReader(loop, prepared.stderr, sink(err, 2)),
        ]
        ooms_before = self.oom.count()
        started = loop.time()
        cpu_limited = timeout is not None or limits.cpu_given
        rlimits = limits.rlimits(cpu=cpu_limited)
        child.start(rlimits=rlimits, uid=tenant.uid, gid=tenant.gid, tty=size is not None, **orders)
        writer = PipeWriter(loop, prepared.stdin)
        writer.write(stdin or b"")
        if stream:
            stream.started(child.pid, tenant, writer, readers[0] if size else None)
        else:
            writer.finish()
        try:
            flooded = loop.create_task(flood.wait())
            done, _ = await aio.wait(
                [child.exited, flooded], timeout=timeout, return_when=aio.FIRST_COMPLETED
            )
            if done and not flood.is_set():
                left = LINGER if timeout is None else started + timeout - loop.time()
                await aio.wait([r.eof for r in readers], timeout=min(LINGER, max(0.0, left)))
            flooded.cancel()
            duration_ms = (loop.time() - started) * 1000
            gone = await self.tenants.kill(tenant)
            await aio.wait([r.eof for r in readers] + [child.exited], timeout=SETTLE)
        finally:
            for reader in readers:
                reader.close()
            writer.close()
            if stream:
                stream.ended()
        if child.exited.done():
            status_word, usage = child.exited.result()
            code, sig = exit_outcome(status_word)
            cpu_ms = children.cpu_ms(usage)
        else:  # stuck in the kernel past the grace (D state): report what we did to it
            code, sig, cpu_ms = -signal.SIGKILL, signal.SIGKILL, 0.0
        status = results.status_of(
            code,
            sig,
            timed_out=not done,
            flooded=flood.is_set(),
            interrupted=generation != self.generation,
            oom_killed=self.oom.count() > ooms_before,
            truncated=out.truncated or err.truncated,
        )
        if cpu_limited and sig in (signal.SIGXCPU, signal.SIGKILL) and cpu_ms >= limits.cpu_seconds * 1000 - 50:
            # The kernel's RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL a second later if
            # that was caught. A signal the run sent itself before using its CPU is "killed".
            status = "timeout"
        fields, payload = results.result(status, code, sig, out, err, duration_ms, cpu_ms)
        return fields, payload, gone


def _phase(fields, payload):
    """A compile phase's result as the answer's ``compile`` field: a result header, with its
    output as text (bounded by the output cap) instead of a payload."""
    split = fields["stdout_len"]
    phase = dict((key, value) for key, value in fields.items() if key != "stdout_len")
    phase["stdout"] = payload[:split].decode("utf-8", "replace")
    phase["stderr"] = payload[split:].decode("utf-8", "replace")
    return phase


class Stream:
    """A spawned program's side of the ``spawn`` op: its events, sent with the request's id
    through ``emit``, and its stdin, which ``process_input`` writes while it runs. It is in
    ``registry`` (the runner's ``processes``) from its start to its end."""

    def __init__(self, registry, tenants, request_id, emit, stdin_open, size=None):
        self.registry = registry
        self.tenants = tenants
        self.id = request_id
        self.emit = emit
        self.stdin_open = bool(stdin_open)
        self.size = size  # [rows, cols] of the pty it runs on, if any
        self.pid = self.tenant = self.stdin = self.tty = None

    def started(self, pid, tenant, stdin, tty=None):
        """``tty``: the reader of its pty's master, if it runs on one."""
        self.pid, self.tenant, self.stdin, self.tty = pid, tenant, stdin, tty
        if not self.stdin_open:
            stdin.finish()
        self.registry[self.id] = self
        self.emit({"id": self.id, "event": "started", "pid": pid})

    def output(self, fd, data):
        self.emit({"id": self.id, "event": "output", "fd": fd}, data)

    def write(self, data, eof):
        if self.stdin is not None:
            self.stdin.write(data)
            if eof:
                self.stdin.finish()

    def resize(self, rows, cols):
        """Set its pty's size (the kernel tells the program with SIGWINCH)."""
        if self.tty is None:
            raise Refused("bad_request", "the program has no pty to resize")
        if self.tty.closed:  # it is ending; its fd number may be another's by now
            return
        try:
            _set_size(self.tty.fd, rows, cols)
        except OSError:
            pass

    async def signal(self, signum):
        """Signal the program's process group (it leads a session of its own)."""
        await self.tenants.signal_group(self.tenant, self.pid, signum)

    def ended(self):
        self.registry.pop(self.id, None)


class _Prepared:
    """A prepared child and the agent's ends of its stdin, stdout and stderr."""

    def __init__(self, child, stdin, stdout, stderr):
        self.child = child
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

    @classmethod
    async def fork(cls, loop, forker, size=None):
        """A child on three pipes, or with ``size`` ([rows, cols]) on a pty: its fds 0-2 are
        the pty's, ours its master (output comes on "stdout"; "stderr" is an empty pipe)."""
        if size is None:
            ends = [os.pipe() for _ in range(3)]
            (in_r, stdin), (stdout, out_w), (stderr, err_w) = ends
            theirs, mapped = (in_r, out_w, err_w), {0: in_r, 1: out_w, 2: err_w}
        else:
            stdout, slave = os.openpty()
            _set_size(stdout, *size)
            stdin = os.dup(stdout)
            stderr, err_w = os.pipe()
            os.close(err_w)
            theirs, mapped = (slave,), {0: slave, 1: slave, 2: slave}
        try:
            child = await Child.fork(loop, forker, mapped)
        except BaseException:
            for fd in (stdin, stdout, stderr):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        return cls(child, stdin, stdout, stderr)

    def discard(self):
        """Let an unstarted child go (it exits when its orders pipe closes)."""
        self.child.discard()
        for fd in (self.stdin, self.stdout, self.stderr):
            os.close(fd)


def _set_size(tty, rows, cols):
    import fcntl
    import struct
    import termios

    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
