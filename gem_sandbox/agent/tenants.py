"""Who runs user code, and making sure all of it is gone when it should be.

Uid mode (a root agent given ``--uid-base``, the normal case inside a sandbox): every run,
kernel and shell gets a uid of its own from the range and the shared gid, with no
supplementary groups, no capabilities and ``no_new_privs``. Without capabilities a process
cannot shed its uid, so "every process whose real uid is U" is exactly what the tenant
started, ``setsid`` and double-fork escapes included. It is killed by a helper that becomes
U and calls ``kill(-1, SIGKILL)``: the kernel signals every process of U in one pass that a
fork bomb cannot outrun.

Token mode (a non-root agent: the process backend, rootless bubblewrap): uids cannot be
switched, so each tenant carries a unique token in its environment and is killed by session,
by descent from the processes forked for it, and by token (as ``/proc/PID/environ`` shows
it: the environment a process was exec'd with). An orphan that no token ties to a live
tenant (it left its session and was exec'd without the token, ``env -i``, or never exec'd
at all: a pure Python double fork) is adopted by the agent, a subreaper, and counts as a
member of whichever tenant is being killed: it dies with the next run that ends, perhaps
before its own run does, but never outlives the lease (``reset`` kills every descendant).
Only processes of the agent's own uid are considered, so nothing outside the sandbox is
ever signalled.
"""

import collections
import os
import signal

from . import aio, ipc, log
from .protocol import Refused

TOKEN_VAR = "GEM_SANDBOX_TOKEN"
KILL_PATIENCE = 2.0  # seconds to keep killing while no process of the kill's dies
RUN_KILL_LIMIT = 1.0  # seconds a run's verdict waits for its tenant's processes to be gone
RESET_KILL_LIMIT = 6.0  # seconds a reset waits for them, while they keep dying
# Where the sandbox has a cgroup of its own (Docker: the backend names its OOM counter), user
# code runs at this nice value: there it ranks a run only below the agent (runs stay equal
# among themselves), so a fork or thread bomb cannot starve the agent that answers pings and
# kills it at its deadline. Without one (bubblewrap) nice would rank runs below every process
# of the host, so they keep the agent's.
RUN_NICE = 19


class Tenant:
    """The identity of one run, kernel or shell."""

    def __init__(self, uid, gid, token):
        self.uid = uid
        self.gid = gid
        self.token = token
        self.leaders = set()  # pids the agent forked for this tenant (each leads a session)


class Process:
    __slots__ = ("pid", "ppid", "uid", "sid", "zombie")

    def __init__(self, pid, ppid, uid, sid, zombie):
        self.pid, self.ppid, self.uid, self.sid, self.zombie = pid, ppid, uid, sid, zombie


def snapshot():
    """The live process table as ``{pid: Process}`` (real uids; session ids as seen here)."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            proc = _read_status(int(name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def _read_status(pid):
    try:
        fd = os.open("/proc/%d/status" % pid, os.O_RDONLY)
        try:
            data = os.read(fd, 8192)
        finally:
            os.close(fd)
    except OSError:
        return None
    fields = {}
    for line in data.split(b"\n"):
        key, _, value = line.partition(b":")
        fields[key] = value.split()
    try:
        return Process(
            pid,
            int(fields[b"PPid"][0]),
            int(fields[b"Uid"][0]),
            int(fields.get(b"NSsid", [-1])[0]),
            fields[b"State"][0] == b"Z",
        )
    except (KeyError, IndexError, ValueError):
        return None


def descendants(table, roots):
    children = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, todo = set(), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _token_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = b"\0" + f.read()
    except OSError:
        return None
    start = env.find(b"\0%s=" % TOKEN_VAR.encode())
    if start < 0:
        return None
    start += len(TOKEN_VAR) + 2
    end = env.find(b"\0", start)
    return env[start : end if end >= 0 else len(env)].decode("ascii", "replace")


class Tenants:
    """Hands out identities and kills what they started."""

    def __init__(self, config, reaper):
        self.reaper = reaper
        self.agent_pid = os.getpid()
        self.agent_uid = os.getuid()
        self.uid_mode = config.uid_mode
        self.nice = RUN_NICE if config.oom_counter else 0  # what Child.start gives a run
        self.gid = config.gid if self.uid_mode else None
        if self.uid_mode:
            self.uid_range = range(config.uid_base, config.uid_base + config.uid_count)
            self.free_uids = collections.deque(self.uid_range)  # FIFO: a uid rests between uses
        self.in_use = set()
        self.exempt = set()  # the agent's own children that run no user code (yet)
        self.finishing = set()  # kills going on after the verdict that could not wait for them
        self.forked = set()  # children forked for the agent that it has heard of, until they end
        self.zygote = None  # the fork server's pid (uid mode): see _alive
        self.tokens = set()  # every token handed out since the last reset: escapes keep theirs
        # The process table the last kill ended on, until a tenant is next acquired: no user
        # process can have started since, so the clean check needs no second /proc pass.
        self.settled = None

    @property
    def isolation(self):
        return "uid" if self.uid_mode else "token"

    def acquire(self, own_group=False):
        """A new tenant; ``own_group`` (uid mode): its gid is its uid, not the shared group
        that owns the work dir, so it can write nothing another tenant made."""
        uid = None
        if self.uid_mode:
            if not self.free_uids:
                raise Refused(
                    "busy",
                    "all %d uids of this sandbox are taken by runs, kernels and shells; "
                    "wait for one to end or start the agent with a larger --uid-count"
                    % len(self.uid_range),
                )
            uid = self.free_uids.popleft()
        gid = uid if own_group and self.uid_mode else self.gid
        tenant = Tenant(uid, gid, os.urandom(8).hex())  # as secrets would, without hashlib
        self.settled = None
        self.in_use.add(tenant)
        self.tokens.add(tenant.token)
        return tenant

    def release(self, tenant, clean=True):
        """Give the tenant's uid back; a uid whose processes could not be killed is not
        handed out again."""
        self.in_use.discard(tenant)
        if self.uid_mode and clean:
            self.free_uids.append(tenant.uid)

    def busy(self):
        """Whether a tenant is live, or a uid is held back because its processes could not
        be killed: a sandbox in either state is not clean."""
        if self.in_use:
            return True
        return self.uid_mode and len(self.free_uids) < len(self.uid_range)

    def environment(self, tenant):
        return {} if self.uid_mode else {TOKEN_VAR: tenant.token}

    def members(self, tenant, table):
        """Pids of the tenant's processes, zombies included: until the agent has reaped them
        they still take process slots (the pids cgroup, RLIMIT_NPROC), so a tenant is only
        gone once they are reaped too."""
        if self.uid_mode:
            return set(p.pid for p in table.values() if p.uid == tenant.uid)
        others = set(t.token for t in self.in_use if t is not tenant)
        roots = set(tenant.leaders)
        for proc in self._own_uid(table):
            if proc.sid in tenant.leaders:
                roots.add(proc.pid)
                continue
            token = _token_of(proc.pid)
            adopted = proc.ppid == self.agent_pid and proc.pid not in self.reaper.watched
            if token == tenant.token or (adopted and token not in others):
                roots.add(proc.pid)
        found = roots | descendants(table, roots)
        return set(p for p in found if p in table and p not in self.exempt)

    def strays(self, table=None):
        """Pids of every live user process of the sandbox (in ``table``; by default the
        one the last kill ended on while still true, else a new snapshot): what reset
        kills."""
        table = table or self.settled or snapshot()
        found = descendants(table, [self.agent_pid])
        if self.uid_mode:
            found.update(p.pid for p in table.values() if p.uid in self.uid_range)
        else:
            found.update(p.pid for p in self._own_uid(table) if _token_of(p.pid) in self.tokens)
        return self._alive(table, found)

    def _own_uid(self, table):
        return [p for p in table.values() if p.uid == self.agent_uid and p.pid != self.agent_pid]

    def born(self, pid, exited):
        """A child was forked for the agent: it runs no user code until :meth:`started`."""
        self.exempt.add(pid)
        self.forked.add(pid)
        exited.add_done_callback(lambda _: self._ended(pid))

    def started(self, pid):
        self.exempt.discard(pid)

    def _ended(self, pid):
        self.exempt.discard(pid)
        self.forked.discard(pid)
        if self.settled is not None:  # the table stays true: only the agent's helper left it
            self.settled.pop(pid, None)

    def _alive(self, table, pids):
        """The live user processes among ``pids``. A child the zygote forked whose pid the
        agent has not heard yet (the reply comes after the fork) has not been started."""
        return set(
            p
            for p in pids
            if p in table
            and not table[p].zombie
            and p not in self.exempt
            and not (table[p].ppid == self.zygote and p not in self.forked)
        )

    async def kill(self, tenant, spare=()):
        """SIGKILL every process of ``tenant`` but ``spare``; True once none is left and
        every zombie is reaped (but those of ``spare``, which reaps its own)."""
        spare = set(spare)

        def select(table):
            pids = self.members(tenant, table) - spare
            return set(p for p in pids if not (table[p].zombie and table[p].ppid in spare))

        gone = await self._kill_until_gone(select, not spare, RUN_KILL_LIMIT)
        if not gone and not spare:
            self._go_on_killing(select)
        if gone and not spare and self.uid_mode:
            # What a run made in System V IPC lives no longer than the run: a segment would
            # otherwise stay resident, beyond the run's memory limit, owned by no process.
            gone = await self.remove_ipc([tenant.uid])
        return gone

    async def kill_all(self):
        """Kill every user process; returns how many there were."""
        killed = set()

        def select(table):
            pids = self.strays(table)
            killed.update(pids)
            return pids

        # What fails here is reported by the reset's check, and the host retires the sandbox.
        await self._kill_until_gone(select, True, RESET_KILL_LIMIT)
        await self.remove_ipc(self.uid_range if self.uid_mode else ())
        return len(killed)

    def _go_on_killing(self, select):
        """A kill the verdict did not wait for goes on after it, as long as a reset's may, so
        that what is left does not run on beside the next run. Its uid stays held back, and
        the sandbox unclean, until a reset (which cancels it: the uid may be handed out)."""
        task = aio.get_running_loop().create_task(
            self._kill_until_gone(select, True, RESET_KILL_LIMIT, settle=False)
        )
        self.finishing.add(task)
        task.add_done_callback(self.finishing.discard)

    def recover(self):
        """After a reset killed everything: forget old tokens, take back quarantined uids."""
        for task in list(self.finishing):
            task.cancel()
        self.tokens = set(t.token for t in self.in_use)
        if self.uid_mode:
            taken = set(t.uid for t in self.in_use)
            self.free_uids = collections.deque(u for u in self.uid_range if u not in taken)

    async def _kill_until_gone(self, select, helpers, limit, settle=True):
        """Kill what ``select(table)`` picks until it picks nothing (True). Under load the
        kernel may take seconds to tear processes down: patience lasts while they keep
        dying (the count reaches a new low within :data:`KILL_PATIENCE`), up to ``limit``
        seconds. False then: the caller holds the uid back or the reset fails, and the host
        replaces the sandbox. Only a kill with ``settle`` leaves its last table for the clean
        check (:attr:`settled`): one going on in the background ends at any time."""
        loop = aio.get_running_loop()
        now = loop.time()
        limit_at, stalled_at, fewest = now + limit, now + KILL_PATIENCE, None
        if settle:
            self.settled = None
        pause = 0.0005
        signalled = set()
        while True:
            self.reaper.reap()
            table = snapshot()
            pids = select(table)
            if not pids:
                if settle:
                    self.settled = table
                return True
            now = loop.time()
            if fewest is None or len(pids) < fewest:
                fewest, stalled_at = len(pids), now + KILL_PATIENCE
            if now > min(limit_at, stalled_at):
                log.warning("%d processes outlived SIGKILL for %.1fs", len(pids), now - limit_at + limit)
                return False
            _stop_then_kill(pids)  # first: under a bomb at the pids limit a helper cannot fork
            if helpers and self.uid_mode and signalled and not pids <= signalled:
                # Processes born since the last pass: something forks while it is killed,
                # and a helper's kill(-1) catches its children in one pass of the kernel.
                # A process that forks nothing (a run, a kernel) dies without a helper's
                # fork, which costs a few ms.
                for uid in set(table[p].uid for p in pids if table[p].uid in self.uid_range):
                    await self._kill_as(uid)
            signalled |= pids
            await aio.sleep(pause)
            pause = min(pause * 2, 0.05)

    async def _kill_as(self, uid):
        """``kill(-1, SIGKILL)`` from a helper that has become ``uid``: one pass over the
        process table in the kernel, so processes forked meanwhile are caught too."""
        await self._as_uid(uid, lambda: os.kill(-1, signal.SIGKILL))

    async def signal_group(self, tenant, pid, signum):
        """Send ``signum`` to the process group ``tenant``'s process ``pid`` leads. The agent
        may signal it while it is still the agent's (a child not yet switched to its uid);
        after that, in uid mode, only a helper that became the tenant's uid may."""
        try:
            _signal_group(pid, signum)
            return
        except ProcessLookupError:
            return  # it ended already; what it left dies with its tenant
        except PermissionError:
            pass

        def send():
            try:
                _signal_group(pid, signum)
            except OSError:
                pass

        if self.uid_mode:
            await self._as_uid(tenant.uid, send)

    def ipc_left(self):
        """Whether System V IPC objects that runs made are left: created by a run's uid (in
        token mode the agent's, which runs share). Objects of other creators are not the
        sandbox's: where the IPC namespace is the host's (the process backend) other
        software holds them."""
        owners = ipc.creators()
        if self.uid_mode:
            return any(uid in self.uid_range for uid in owners)
        return self.agent_uid in owners

    async def remove_ipc(self, uids):
        """Remove the System V IPC objects that ``uids`` created (token mode: all of them,
        every run having the agent's uid); True when none is left."""
        if not self.uid_mode:
            return ipc.remove_own(self.agent_uid) == 0
        owners = ipc.creators() & set(uids)
        if not owners:  # the usual case at a run's end: one read of /proc/sysvipc, no helper
            return True
        for uid in owners:
            await self._as_uid(uid, lambda: ipc.remove_own(uid))
        return not (ipc.creators() & set(uids))

    async def _as_uid(self, uid, action):
        """Run ``action`` in a forked helper that has become ``uid`` (and can then do to
        that uid's processes and objects what their owner can), and wait for it."""
        try:
            pid = os.fork()
        except BlockingIOError:  # the pids limit is full: the caller's own fallbacks apply
            return
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                action()
            finally:
                os._exit(0)
        await self.reaper.watch(pid)


def _signal_group(pid, signum):
    """Signal the group ``pid`` leads, or ``pid`` alone while it has not made its session
    yet (a child just forked: nothing of it runs but itself)."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        os.kill(pid, signum)


def _stop_then_kill(pids):
    """Stop them all, then kill them all: a stopped process forks no more, so a fork bomb
    cannot refill the process slots its killed members free while the pass goes on."""
    for signum in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
