"""What runs in a forked child, from the fork to the user's code.

A child is prepared before it knows what it will run: a new session (so a group kill reaches
the whole job), its parent's signal handlers and descriptors gone, its stdio in place. Then
it blocks until its orders (program, rlimits, identity, cwd, environment) arrive on
its orders pipe, obeys them, and runs Python code in this interpreter or execs a program.

It imports only what the zygote (:mod:`.zygote`, which forks it) may hold: the interpreter
a run forks from is kept small, since a fork's and an exit's cost grow with its memory.
Without ``logging``, ``json``, ``argparse``, ``ast`` and the enum-heavy ``signal`` and
``socket`` wrappers the zygote's private memory fell from 6.9 to 4.0 MB, and a trivial run
from 6.7 to 4.1 ms. Hence ``_signal`` rather than ``signal``, ``marshal`` for the orders
(they come from the agent alone) and late imports where rare. (``ast`` and ``json``, which
kernels need, and ``typing``, which most scored code imports, are in the zygote after all, but
as pages it shares with the agent, which imported them before forking it: see ``__main__``.)
"""

import _signal as signal
import fcntl
import gc
import marshal
import os
import resource
import sys

from . import linux, pyexec

# Python sets these at startup; an exec'd program must get them back at their defaults or
# it inherits "ignored" (``yes | head`` would see EPIPE errors instead of dying quietly).
_PYTHON_DISPOSITIONS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT)


def exit_outcome(status):
    """``(exit_code, signal)`` of a wait status; a signal death has ``exit_code == -signal``
    (the subprocess convention)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return -sig, sig
    return os.WEXITSTATUS(status), None


def reaped():
    """``(pid, wait status, rusage)`` of each ended child of this process, without waiting
    (the agent's reaper and the zygote's both)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status, usage


def prepared_child(fds, control_r):
    """Map ``fds`` (``{target fd: source fd}``), close every other descriptor, wait for the
    orders on ``control_r`` and obey them; never returns."""
    status = 127
    try:
        gc.freeze()  # the parent's objects: never scanned here, so their pages stay shared
        os.setsid()
        _reset_signals()
        control = _map_fds(fds, control_r)
        os.umask(0o002)
        os.environ.clear()
        pyexec.fresh_stdio()
        linux.set_no_new_privs()  # what needs no orders is done before they come
        linux.deny_shared_kernel_state()
        orders = _read_all(control)
        if not orders:
            status = 0  # discarded before it was used
        else:
            os.close(control)
            status = _obey(marshal.loads(orders))
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    finally:
        os._exit(status if isinstance(status, int) else 1)


def _obey(orders):
    if orders.get("tty"):  # its fds 0-2 are a pty's: make it the session's terminal
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    if orders["program"] == "kernel":
        pyexec.load_kernel_modules()
    _apply_rlimits(orders["rlimits"])
    _first_to_die()  # only now: an idle prepared child is no candidate of the OOM killer
    os.umask(orders.get("umask", 0o002))
    if orders["uid"] is not None:
        os.setgroups([])
        os.setresgid(orders["gid"], orders["gid"], orders["gid"])
        os.setresuid(orders["uid"], orders["uid"], orders["uid"])
        linux.clear_capabilities()
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
    try:  # not open(): its io objects cost a warm run 0.05 ms
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, b"1000")
        finally:
            os.close(fd)
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
        for name, data in orders["files"].items():
            with open(os.path.join(orders["scratch"], name), "wb") as f:
                f.write(data)
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
