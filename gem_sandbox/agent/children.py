"""Forking the processes that run user code, and reaping every child the agent has.

Every run, kernel and shell is forked straight from the agent. A :class:`Child` is prepared
before it knows what it will run: a new session (so a group kill reaches the whole job), the
agent's signal handlers and descriptors gone, its stdio in place. Then it blocks until
:meth:`Child.start` sends its orders (program, rlimits, identity, cwd, environment) as JSON
on a pipe. Preparing is most of what a fork costs (copy-on-write faults, mostly), so the
runner keeps one child prepared ahead and a warm Python run costs little more than the
code itself. Python code runs in the forked interpreter; other programs are exec'd.
"""

import asyncio
import fcntl
import gc
import json
import os
import resource
import signal
import sys
import traceback

from . import linux, protocol, pyexec
from .pipes import PipeWriter

# Python sets these at startup; an exec'd program must get them back at their defaults or
# it inherits "ignored" (``yes | head`` would see EPIPE errors instead of dying quietly).
_PYTHON_DISPOSITIONS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT)


class Reaper:
    """Reaps every child on SIGCHLD, including orphans the agent adopts as a subreaper, and
    resolves the future of each pid someone is watching with ``(wait status, rusage)``."""

    def __init__(self, loop):
        self.loop = loop
        self.watched = {}
        loop.add_signal_handler(signal.SIGCHLD, self.reap)

    def watch(self, pid):
        """Call right after the fork, before yielding to the loop, so no exit is missed."""
        future = self.loop.create_future()
        self.watched[pid] = future
        return future

    def reap(self):
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            future = self.watched.pop(pid, None)
            if future is not None and not future.done():
                future.set_result((status, usage))


class Child:
    """A forked child that has mapped ``fds`` (``{target fd: source fd}``) onto its
    descriptors, closed all others, and waits for :meth:`start`."""

    def __init__(self, loop, reaper, fds):
        self.loop = loop
        control_r, control_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            _prepared_child(fds, control_r)  # never returns
        self.exited = reaper.watch(self.pid)
        os.close(control_r)
        self.control = PipeWriter(loop, control_w, close_when_done=True)

    def start(self, program, rlimits, uid, gid, cwd, env, **arguments):
        """Send the orders: apply ``rlimits``, become ``uid``/``gid`` (None: stay), move to
        ``cwd``, take ``env``, and run ``program`` ("python", "kernel" or "exec")."""
        orders = dict(
            arguments, program=program, rlimits=rlimits, uid=uid, gid=gid, cwd=cwd, env=env
        )
        self.control.write(json.dumps(orders).encode())

    def discard(self):
        """An unstarted child exits when its orders pipe closes."""
        self.control.close()


def exit_outcome(status):
    """``(exit_code, signal)`` of a wait status; a signal death has ``exit_code == -signal``
    (the subprocess convention)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return -sig, sig
    return os.WEXITSTATUS(status), None


def cpu_ms(usage):
    return (usage.ru_utime + usage.ru_stime) * 1000.0


# --- what runs in the child -------------------------------------------------------------


def _prepared_child(fds, control_r):
    status = 127
    try:
        gc.freeze()  # the agent's objects: never scanned here, so their pages stay shared
        os.setsid()
        _reset_signals()
        control = _map_fds(fds, control_r)
        os.umask(0o002)
        os.environ.clear()
        pyexec.fresh_stdio()
        orders = _read_all(control)
        if not orders:
            status = 0  # discarded before it was used
        else:
            os.close(control)
            status = _obey(json.loads(orders.decode()))
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    finally:
        os._exit(status if isinstance(status, int) else 1)


def _obey(orders):
    _apply_rlimits(orders["rlimits"])
    _first_to_die()
    if orders["uid"] is not None:
        os.setgroups([])
        os.setresgid(orders["gid"], orders["gid"], orders["gid"])
        os.setresuid(orders["uid"], orders["uid"], orders["uid"])
        linux.clear_capabilities()
    linux.set_no_new_privs()
    linux.deny_shared_kernel_state()
    os.chdir(orders["cwd"])
    os.environ.update(orders["env"])
    if orders["program"] == "python":
        return pyexec.run_source(orders["code"], orders["cwd"])
    if orders["program"] == "kernel":
        return pyexec.serve_cells(orders["cwd"])
    return _exec(orders)


def _first_to_die():
    """The kernel's OOM killer picks user code before the agent (while still privileged
    enough to write the file; raising one's own score needs no capability anyway)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


def _exec(orders):
    """Write ``files`` into a new ``scratch`` dir only this uid can enter, run each argv of
    ``before`` (stopping at the first failure, whose status is returned), then exec
    ``argv``."""
    for sig in _PYTHON_DISPOSITIONS:
        signal.signal(sig, signal.SIG_DFL)
    if orders.get("files"):
        os.mkdir(orders["scratch"], 0o700)
        for name, text in orders["files"].items():
            with open(os.path.join(orders["scratch"], name), "wb") as f:
                f.write(protocol.text_bytes(text))
    for argv in orders.get("before", ()):
        code, sig = exit_outcome(_call(argv))
        if code != 0:
            return code if sig is None else 128 + sig
    argv = orders["argv"]
    os.execve(argv[0], argv, os.environ)


def _call(argv):
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            os.execve(argv[0], argv, os.environ)
        finally:
            os._exit(127)
    return os.waitpid(pid, 0)[1]


def _reset_signals():
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    # The agent's event loop is still marked running in this thread; user code that starts
    # its own (asyncio.run) must not see it.
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)


def _map_fds(fds, control_r):
    """Put each source on its target and close everything else; returns where the orders
    pipe ended up (above every target, so no dup2 clobbers a source)."""
    lifted = dict(
        (target, fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, 64)) for target, src in fds.items()
    )
    control = fcntl.fcntl(control_r, fcntl.F_DUPFD_CLOEXEC, 64)
    for target, src in lifted.items():
        os.dup2(src, target)
    keep = set(fds) | {control}
    for fd in _open_fds():
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    return control


def _open_fds():
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: walk the whole table
        return range(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _apply_rlimits(rlimits):
    for which, soft, hard in rlimits:
        current_hard = resource.getrlimit(which)[1]
        if current_hard != resource.RLIM_INFINITY:
            hard = current_hard if hard == resource.RLIM_INFINITY else min(hard, current_hard)
            soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        resource.setrlimit(which, (soft, hard))
