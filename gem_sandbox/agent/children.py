"""The agent's side of the processes that run user code: forking them and reaping them.

A :class:`Child` is forked (by the zygote, :mod:`.zygote`, or in token mode by the agent)
and prepared before it knows what it will run (:mod:`.forked`); :meth:`Child.start` then
sends its orders (program, rlimits, identity, cwd, environment) on a pipe. Preparing
is most of what a fork costs, so the runner keeps one child prepared ahead and a warm Python
run costs little more than the code itself. Python code runs in the forked interpreter;
other programs are exec'd.
"""

import marshal
import os
import signal

from .forked import reaped
from .pipes import PipeWriter


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
        for pid, status, usage in reaped():
            self.resolve(pid, status, usage)

    def resolve(self, pid, status, usage):
        """``pid`` ended (reaped here, or by the zygote that forked it)."""
        future = self.watched.pop(pid, None)
        if future is not None and not future.done():
            future.set_result((status, usage))


class Child:
    """A forked child that has mapped its descriptors, closed all others, and waits for
    :meth:`start`; made by :meth:`fork`."""

    def __init__(self, loop, pid, exited, control_w, tenants):
        self.pid = pid
        self.exited = exited
        self.tenants = tenants
        self.control = PipeWriter(loop, control_w, close_when_done=True)

    @classmethod
    async def fork(cls, loop, forker, fds):
        """A child with ``fds`` (``{target fd: source fd}``) on its descriptors; the caller
        keeps and closes the sources."""
        control_r, control_w = os.pipe()
        try:
            pid, exited = await forker.fork(fds, control_r)
        except BaseException:
            os.close(control_w)
            raise
        finally:
            os.close(control_r)
        return cls(loop, pid, exited, control_w, forker.tenants)

    def start(self, program, rlimits, uid, gid, cwd, env, **arguments):
        """Send the orders: apply ``rlimits``, become ``uid``/``gid`` (None: stay), move to
        ``cwd``, take ``env``, and run ``program`` ("python", "kernel" or "exec"). They go
        in ``marshal``'s format, which the child reads without importing anything."""
        orders = dict(
            arguments, program=program, rlimits=rlimits, uid=uid, gid=gid, cwd=cwd, env=env
        )
        if self.tenants.nice:
            try:  # still the agent's (or root's) child: lowering its priority needs no privilege
                os.setpriority(os.PRIO_PROCESS, self.pid, self.tenants.nice)
            except OSError:
                pass  # it ended already, and the run will say so
        self.tenants.started(self.pid)  # from now on it is the tenant's
        self.control.write(marshal.dumps(orders))

    def discard(self):
        """An unstarted child exits when its orders pipe closes."""
        self.control.close()


def cpu_ms(usage):
    return (usage.ru_utime + usage.ru_stime) * 1000.0
