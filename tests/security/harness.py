"""The adversarial harness: one hostile payload, four promises checked around it.

Every case of the security suite is a :class:`Case`: a payload (Python or bash source run with
``Sandbox.run``, a ``shell`` command, a ``kernel_exec`` cell, or an API action such as a file
transfer) and the verdicts it may honestly give. :meth:`Harness.verify` runs it on a fresh
two-sandbox pool and asserts, for every case:

1. **A typed verdict.** An :class:`ExecResult` whose status is one the case allows (or, for an
   action that misuses the API, a typed :mod:`gem_sandbox.sandbox.errors` exception), within a
   deadline (no hang), never an untyped exception, and never ``infra_error`` for a payload the
   code controls: trainers mask ``infra_error``, so a model must not be able to produce it.
2. **The neighbour is unaffected.** The pool's other sandbox runs a benign program, started
   while the payload runs, and gets ``ok`` with the expected output.
3. **The host is back to baseline.** After the payload's run no user process is left in its
   sandbox; after the reset the sandbox's pid namespace (seen from the host) holds what it held
   when fresh; after the pool closes nothing is left in either namespace, no host process of
   ours is new, no container of the pool remains, no SysV IPC object of a sandbox uid is on
   the host and the host's ``Shmem`` did not grow by more than 64 MiB.
4. **The next tenant is clean.** The same sandbox (by ``sandbox.id``), released and reset by
   the pool and leased again, passes a probe that is compared with the one it gave when fresh:
   no user processes, empty work dir, tmp dirs and ``$HOME``, no SysV IPC, no extra keys, the
   case's loopback port and abstract socket name free, Python, bash and the persistent shell
   and kernel behaving as new.

Payload sources may use placeholders that :meth:`Harness.verify` fills in:

``@PORT@``          the loopback port of this case (the next tenant must be able to bind it)
``@HOST_PORT@``     a port the test process listens on at 127.0.0.1, and the abstract unix socket
                    ``gem-sec-host-@HOST_PORT@`` it listens on (the sandbox must reach neither)
``@AGENT_PID@``     the agent's pid inside the sandbox (from the agent's hello)
``@SECRET@``        the value of a secret variable set in the test process's environment
``@PIDS@``          the sandbox's process limit (``SandboxSpec.pids``)
``@PAYLOAD_OUT@``   (``next_tenant`` only) the payload's stdout, stripped
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import textwrap
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from gem_sandbox.agent.tenants import descendants, snapshot
from gem_sandbox.sandbox import errors
from gem_sandbox.sandbox.backends.base import Backend, SandboxSpec
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import ExecResult, Status

S = Status
ANY: Any = object()  # an exit code or signal the case does not pin down
MIB = 1024 * 1024
SECRET_VAR = "GEM_SECURITY_HOST_SECRET"
SECRET = "hunter2-" + os.urandom(6).hex()
PIDS = 128
SPEC = SandboxSpec(memory_mb=256, pids=PIDS, workdir_mb=64, tmp_mb=32)
LIMITS = RunLimits(run_memory_mb=256, max_output_bytes=64 * 1024)
NEIGHBOUR = "print('benign', 6 * 7)"
NEIGHBOUR_OUT = "benign 42\n"
HANG_SLACK = 10.0  # seconds past a case's own timeout after which a call counts as a hang
_pool_numbers = itertools.count(1)
_FRESH: dict[str, Probe] = {}  # per backend: the probe of a fresh sandbox (the reference)

Action = Callable[[Sandbox, "Context"], Awaitable["ExecResult | None"]]


@dataclass(frozen=True)
class Case:
    """One adversarial payload and the verdicts it may honestly give.

    ``kind`` is ``python`` or ``bash`` (a ``run``), ``shell``, ``kernel`` or ``action`` (an
    async callable ``(sandbox, context)`` that may return an :class:`ExecResult`).
    ``statuses`` are the allowed result statuses; ``raises`` the typed errors an action may
    raise instead (an action with ``raises`` and ``may_return=False`` must raise one).
    ``expect`` makes further assertions on the result. ``next_tenant`` is Python run on the
    next tenant of the same sandbox, which must exit 0 (``@PAYLOAD_OUT@`` available).
    ``neighbour`` is Python run on the other sandbox after ``neighbour_delay`` seconds; it
    must print ``benign 42``. ``skip`` maps a backend to the reason the SECURITY model gives
    for the case not applying there. ``bounded_pids``: the payload is an exponential bomb; it
    is only detonated where a run cannot fork past the sandbox's process limit.
    """

    name: str
    kind: str
    payload: str | Action
    statuses: frozenset[Status] = frozenset()
    exit_code: Any = ANY
    signal: Any = ANY
    raises: tuple[type[BaseException], ...] = ()
    may_return: bool = True
    expect: Callable[[ExecResult], None] | None = None
    timeout: float = 2.0
    next_tenant: str | None = None
    neighbour: str = NEIGHBOUR
    neighbour_delay: float = 0.05
    skip: Mapping[str, str] = field(default_factory=dict)
    bounded_pids: bool = False
    limits: RunLimits | None = None

    @property
    def port(self) -> int:
        return 20000 + zlib.crc32(self.name.encode()) % 20000

    def __str__(self) -> str:
        return self.name


def case(name: str, kind: str, payload: str | Action, statuses: Any = (), **kw: Any) -> pytest.param:
    """A :class:`Case` as a ``pytest.param`` with its name as the test id."""
    if isinstance(statuses, Status):
        statuses = (statuses,)
    if isinstance(payload, str):
        payload = textwrap.dedent(payload).strip("\n") + "\n"
    return pytest.param(Case(name, kind, payload, frozenset(statuses), **kw), id=name)


@dataclass
class Context:
    """What a payload may be told about its surroundings."""

    backend: str
    port: int
    host_port: int
    agent_pid: int

    def fill(self, text: str, payload_out: str = "") -> str:
        return (
            text.replace("@PORT@", str(self.port))
            .replace("@HOST_PORT@", str(self.host_port))
            .replace("@AGENT_PID@", str(self.agent_pid))
            .replace("@SECRET@", SECRET)
            .replace("@PIDS@", str(PIDS))
            .replace("@PAYLOAD_OUT@", payload_out)
        )


# --------------------------------------------------------------------------------------------
# The next-tenant probe
# --------------------------------------------------------------------------------------------

PROBE = r"""
import builtins, json, os, socket, sys
me = os.getpid()
procs = []
for name in os.listdir('/proc'):
    if not name.isdigit() or int(name) == me:
        continue
    try:
        status = open('/proc/%s/status' % name).read()
        cmd = open('/proc/%s/cmdline' % name, 'rb').read()
    except OSError:
        continue
    f = dict(line.split(':', 1) for line in status.splitlines() if ':' in line)
    cmd = cmd.replace(b'\0', b' ').decode('utf-8', 'replace').strip() or '[%s]' % f['Name'].strip()
    procs.append([int(name), int(f['PPid']), int(f['Uid'].split()[0]), f['State'].split()[0], cmd])
dirs = {}
for d in ('/work', '/tmp', '/var/tmp', '/dev/shm', '/dev/mqueue', os.environ.get('HOME', '/work')):
    if os.path.isdir(d):
        try:
            dirs[d] = sorted(os.listdir(d))
        except OSError as exc:
            dirs[d] = 'unreadable: %s' % exc
sysv = {}
for kind in ('shm', 'msg', 'sem'):
    try:
        sysv[kind] = open('/proc/sysvipc/' + kind).read().splitlines()[1:]
    except OSError:
        sysv[kind] = []
try:
    keys = open('/proc/keys').read().splitlines()
except OSError:
    keys = []
def bind(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_INET:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(address)
        s.listen(1)
        return 'ok'
    except OSError as exc:
        return 'bind failed: %s' % exc
    finally:
        s.close()
try:
    assert False
    asserts = 'assert is a no-op'
except AssertionError:
    asserts = 'ok'
print(json.dumps(dict(
    procs=procs, dirs=dirs, sysv=sysv, keys=keys,
    tcp=bind(socket.AF_INET, ('127.0.0.1', @PORT@)),
    unix=bind(socket.AF_UNIX, '\0gem-sec-@PORT@'),
    env=sorted(os.environ), planted=sorted(k for k in os.environ if 'PLANT' in k or 'BASH_ENV' in k),
    cwd=os.getcwd(), path=sys.path, asserts=asserts, builtins=len(dir(builtins)),
    modules=sorted(m for m in sys.modules if 'custom' in m or 'plant' in m),
)))
"""

SHELL_PROBE = (
    'echo "[${GEM_PLANTED-}]"; pwd; declare -F; alias; trap -p; echo "opts=$-"; umask; '
    "compgen -v | tr '\\n' ' '; echo; echo sh-ok"
)
BASH_PROBE = 'echo bash-ok; echo "[${GEM_PLANTED-}]"; python3 -c "print(\'py-ok\')"'
BASH_PROBE_OUT = "bash-ok\n[]\npy-ok\n"
KERNEL_PROBE = "print(sorted(k for k in globals() if not k.startswith('__')))"


def user_processes(procs: list[list[Any]], agent_pid: int) -> list[list[Any]]:
    """Processes a probe saw that are neither the sandbox's own machinery (its init, the
    agent and the agent's prepared child, Docker's ``sleep infinity``) nor the probe."""
    found = []
    for pid, ppid, uid, state, cmd in procs:
        if pid in (1, agent_pid) or "gem_agent" in cmd or cmd in ("sleep infinity",):
            continue
        found.append([pid, ppid, uid, state, cmd])
    return found


def _key_kinds(lines: list[str]) -> set[str]:
    """/proc/keys lines without serials, timers, counts and uids: ``type description``."""
    kinds = set()
    for line in lines:
        parts = line.split(None, 8)
        if len(parts) == 9:
            kinds.add(re.sub(r"\d+", "N", parts[7] + " " + parts[8].split(":")[0]))
    return kinds


@dataclass
class Probe:
    stats: dict[str, Any]
    python: ExecResult
    report: dict[str, Any]
    shell: ExecResult
    bash: ExecResult
    kernel: ExecResult


async def probe(sb: Sandbox, ctx: Context) -> Probe:
    stats = await sb.stats()
    python = await sb.run(ctx.fill(PROBE), timeout=10)
    assert python.status is S.OK and python.stderr == "", f"the probe itself failed: {python}"
    try:
        report = json.loads(python.stdout)
    except ValueError:
        raise AssertionError(f"the probe printed more than its report (a planted effect?): {python.stdout!r}")
    shell = await sb.shell(SHELL_PROBE, timeout=10)
    bash = await sb.run(BASH_PROBE, "bash", timeout=10)
    kernel = await sb.kernel_exec(KERNEL_PROBE, timeout=10)
    return Probe(stats, python, report, shell, bash, kernel)


def assert_clean(after: Probe, fresh: Probe, ctx: Context) -> None:
    """The next tenant finds the sandbox as a fresh one is."""
    r, base = after.report, fresh.report
    problems = []
    if after.stats["processes"] != 0:
        problems.append(f"stats() counts {after.stats['processes']} user processes")
    leftover = user_processes(r["procs"], ctx.agent_pid)
    if leftover:
        problems.append(f"user processes visible from inside: {leftover}")
    for d, entries in r["dirs"].items():
        if entries != []:
            problems.append(f"{d} is not empty: {entries if isinstance(entries, str) else entries[:10]}")
    for kind, lines in r["sysv"].items():
        if lines:
            problems.append(f"System V {kind} objects left: {lines[:5]}")
    new_keys = _key_kinds(r["keys"]) - _key_kinds(base["keys"])
    planted_keys = [k for k in r["keys"] if "gem-sec" in k]
    if new_keys or planted_keys:
        problems.append(f"keys beyond the defaults: {sorted(new_keys)} {planted_keys}")
    if r["tcp"] != "ok":
        problems.append(f"loopback port {ctx.port}: {r['tcp']}")
    if r["unix"] != "ok":
        problems.append(f"abstract socket gem-sec-{ctx.port}: {r['unix']}")
    for key in ("env", "planted", "cwd", "path", "asserts", "builtins", "modules"):
        if r[key] != base[key]:
            problems.append(f"python {key}: {r[key]!r}, fresh: {base[key]!r}")
    if (after.shell.status, after.shell.stdout, after.shell.stderr) != (
        fresh.shell.status,
        fresh.shell.stdout,
        fresh.shell.stderr,
    ):
        problems.append(f"the shell session is not fresh: {after.shell!r}, fresh: {fresh.shell!r}")
    if (after.bash.status, after.bash.stdout, after.bash.stderr) != (S.OK, BASH_PROBE_OUT, ""):
        problems.append(f"bash/python3 do not behave normally: {after.bash!r}")
    if (after.kernel.status, after.kernel.stdout) != (fresh.kernel.status, fresh.kernel.stdout):
        problems.append(f"the kernel namespace is not fresh: {after.kernel!r}, fresh: {fresh.kernel!r}")
    assert not problems, "the next tenant is not clean:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------------------------
# The host's view
# --------------------------------------------------------------------------------------------


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


_TICKS = os.sysconf("SC_CLK_TCK")


def _started(pid: int) -> int | None:
    """A process's start time, in clock ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _now_ticks() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * _TICKS)


def host_processes_in(ns: str, started_before: int | None = None) -> dict[int, str]:
    """Host pids (and command lines) of every process in the pid namespace ``ns``; with
    ``started_before``, only those started before that tick (a namespace's inode number is
    reused once the namespace is gone, by whichever sandbox is made next on this host)."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and _pid_ns(int(name)) == ns:
            if started_before is not None and (_started(int(name)) or 0) > started_before:
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    found[int(name)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                pass
    return found


def machinery_free(procs: dict[int, str]) -> set[int]:
    """Host pids of a sandbox's processes that are not the agent or its prepared child."""
    return {pid for pid, cmd in procs.items() if "gem_agent" not in cmd}


async def _outliving(ns: str, machinery: set[int], patience: float = 2.0) -> dict[int, str]:
    """Processes of namespace ``ns`` beyond ``machinery`` that stay for ``patience`` seconds,
    as ``pid: "state cmdline"``. A process the reset killed may be seen for a moment as it
    exits (a zombie, its command line already gone) on a loaded host; one that stays is a leak."""
    deadline = time.monotonic() + patience
    while True:
        procs = host_processes_in(ns)
        left = {pid: f"{_state(pid)} {procs[pid]!r}" for pid in machinery_free(procs) - machinery}
        if not left or time.monotonic() > deadline:
            return left
        await anyio.sleep(0.05)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "gone"


def _meminfo(key: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _host_sysv() -> set[str]:
    """Host SysV IPC objects owned by uids a sandbox can have (run uids, nobody)."""
    found = set()
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            uid_col = {"shm": 7, "msg": 7, "sem": 4}[kind]
            if len(cols) > uid_col and int(cols[uid_col]) >= 20000:
                found.add(f"{kind} {cols[0]} {cols[1]}")
    return found


@dataclass
class HostBaseline:
    ours: set[int]
    sysv: set[str]
    shmem: int

    @classmethod
    def capture(cls) -> HostBaseline:
        table = snapshot()
        ours = {p for p in descendants(table, [os.getpid()]) if not table[p].zombie}
        return cls(ours, _host_sysv(), _meminfo("Shmem"))


# --------------------------------------------------------------------------------------------
# The harness
# --------------------------------------------------------------------------------------------


class Harness:
    def __init__(self, backend_name: str, backend: Backend, docker_client: Any = None) -> None:
        self.backend_name = backend_name
        self.backend = backend
        self.docker = docker_client

    def pool(self, name: str) -> SandboxPool:
        config = PoolConfig(
            min_idle=2,
            max_size=2,
            spec=SPEC,
            limits=LIMITS,
            run_timeout=3.0,
            reset_timeout=15.0,
            acquire_timeout=30.0,
            health_interval=3600.0,
        )
        return SandboxPool(self.backend, config, name=name)

    def _namespace(self, sb: Sandbox) -> str:
        if self.backend_name == "docker":
            pid = self.docker.api.inspect_container(sb.id)["State"]["Pid"]
        else:
            from tests.sandbox_fixtures import agent_host_pid

            pid = agent_host_pid(sb)
        ns = _pid_ns(pid)
        assert ns is not None
        return ns

    async def verify(self, case: Case) -> None:
        reason = case.skip.get(self.backend_name)
        if reason:
            pytest.skip(reason)
        before = HostBaseline.capture()
        name = f"gem-sandbox-tests-security-{os.getpid()}-{next(_pool_numbers)}"
        namespaces: list[str] = []
        with socket.socket() as listener, socket.socket(socket.AF_UNIX) as abstract:
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            host_port = listener.getsockname()[1]
            abstract.bind(f"\0gem-sec-host-{host_port}")  # the host's: the sandbox must not reach it
            abstract.listen(16)
            with anyio.fail_after(case.timeout + 120):
                try:
                    async with self.pool(name) as pool:
                        await self._exercise(pool, case, host_port, namespaces)
                        closing = _now_ticks()
                except BaseExceptionGroup as group:  # the pool's task group wraps our failure
                    raise _innermost(group) from None
                # Processes of a killed namespace take a moment to finish exiting.
                with anyio.move_on_after(3):
                    while any(host_processes_in(ns, closing) for ns in namespaces):
                        await anyio.sleep(0.05)
        self._assert_host_back(before, name, namespaces, closing)

    async def _exercise(self, pool: SandboxPool, case: Case, host_port: int, namespaces: list[str]) -> None:
        with anyio.fail_after(60):
            await pool.wait_ready(60)
            target, neighbour = await pool.acquire(), await pool.acquire()
        ids = (target.id, neighbour.id)
        namespaces += [self._namespace(target), self._namespace(neighbour)]
        ctx = Context(self.backend_name, case.port, host_port, target.hello["pid"])
        fresh = _FRESH.get(self.backend_name)
        if fresh is None:  # what a fresh sandbox of this backend looks like, probed once
            with anyio.fail_after(60):
                fresh = _FRESH[self.backend_name] = await probe(target, ctx)
                await target.reset()
        machinery = machinery_free(host_processes_in(namespaces[0]))
        if case.bounded_pids:
            await self._require_pid_bound(target, ctx)

        outcome: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._attack, target, case, ctx, outcome)
            await anyio.sleep(case.neighbour_delay)
            with anyio.fail_after(30):
                benign = await neighbour.run(ctx.fill(case.neighbour), timeout=10)
        self._assert_verdict(case, outcome)
        assert (benign.status, benign.stdout) == (S.OK, NEIGHBOUR_OUT), (
            f"the neighbouring sandbox was affected by the payload: {benign!r}"
        )
        if case.kind in ("python", "bash") and isinstance(outcome.get("result"), ExecResult):
            with anyio.fail_after(10):
                left = (await target.stats())["processes"]
            assert left == 0, f"{left} user processes outlived the payload's run"

        await pool.release(target)
        await pool.release(neighbour)
        with anyio.fail_after(40):
            again = [await pool.acquire(), await pool.acquire()]
        same = [sb for sb in again if sb.id == target.id]
        assert same, (
            f"sandbox {target.id} did not come back from its reset (the pool replaced it; "
            f"now {[sb.id for sb in again]}, before {ids})"
        )
        next_tenant = same[0]
        left = await _outliving(namespaces[0], machinery)
        assert not left, f"after the reset the sandbox holds host processes it did not hold when fresh: {left}"
        with anyio.fail_after(60):
            after = await probe(next_tenant, ctx)
            assert_clean(after, fresh, ctx)
            if case.next_tenant:
                code = ctx.fill(textwrap.dedent(case.next_tenant), outcome.get("stdout", ""))
                check = await next_tenant.run(code, timeout=10)
                assert check.status is S.OK, f"the next tenant found the payload's traces: {check!r}"
        for sb in again:
            await pool.release(sb)

    async def _require_pid_bound(self, sb: Sandbox, ctx: Context) -> None:
        """An exponential bomb is only detonated where the sandbox bounds its processes:
        without a bound it would take the shared host's pid space, not just the sandbox's."""
        result = await sb.run(ctx.fill(LINEAR_FORKS), timeout=5)
        await sb.reset()
        forked = int(result.stdout.split()[-1]) if result.stdout.split() else -1
        if not 0 <= forked <= PIDS:
            pytest.fail(
                f"a run forked {forked} processes past the sandbox's limit of {PIDS} "
                f"({result.status.value}); not detonating an unbounded bomb on the shared host"
            )

    async def _attack(self, sb: Sandbox, case: Case, ctx: Context, outcome: dict[str, Any]) -> None:
        limit = case.timeout + HANG_SLACK
        try:
            with anyio.fail_after(limit):
                if case.kind == "action":
                    assert callable(case.payload)
                    outcome["result"] = await case.payload(sb, ctx)
                else:
                    assert isinstance(case.payload, str)
                    code = ctx.fill(case.payload)
                    if case.kind in ("python", "bash"):
                        outcome["result"] = await sb.run(
                            code, case.kind, timeout=case.timeout, limits=case.limits
                        )
                    elif case.kind == "shell":
                        outcome["result"] = await sb.shell(code, timeout=case.timeout)
                    elif case.kind == "kernel":
                        outcome["result"] = await sb.kernel_exec(code, timeout=case.timeout)
                    else:
                        raise ValueError(f"no payload kind {case.kind!r}")
        except TimeoutError:
            outcome["hang"] = limit
        except AssertionError as exc:  # an action's own check failed: reported as such
            outcome["assertion"] = exc
        except Exception as exc:  # judged in _assert_verdict, after the neighbour's run
            outcome["error"] = exc
        result = outcome.get("result")
        if isinstance(result, ExecResult):
            outcome["stdout"] = result.stdout.strip()

    def _assert_verdict(self, case: Case, outcome: dict[str, Any]) -> None:
        if "assertion" in outcome:
            raise outcome["assertion"]
        if "hang" in outcome:
            pytest.fail(f"no verdict within {outcome['hang']:.0f} s: the call hung")
        exc = outcome.get("error")
        if exc is not None:
            if case.raises and isinstance(exc, case.raises):
                return
            kind = "a typed" if isinstance(exc, errors.SandboxError) else "an untyped"
            pytest.fail(f"{kind} exception instead of a verdict: {type(exc).__name__}: {exc}")
        if case.raises and not case.may_return:
            pytest.fail(f"expected one of {[e.__name__ for e in case.raises]}, got {outcome.get('result')!r}")
        result = outcome.get("result")
        if result is None:
            return  # an action that checked its own outcome
        assert isinstance(result, ExecResult), f"not a verdict: {result!r}"
        assert result.status is not S.INFRA_ERROR, (
            f"infra_error for a payload the code controls (trainers would mask it): {result!r}"
        )
        if case.statuses:
            assert result.status in case.statuses, (
                f"status {result.status.value}, allowed {sorted(s.value for s in case.statuses)}: {result!r}"
            )
        if case.exit_code is not ANY:
            assert result.exit_code == case.exit_code, f"exit code {result.exit_code}, expected {case.exit_code}: {result!r}"
        if case.signal is not ANY:
            assert result.signal == case.signal, f"signal {result.signal}, expected {case.signal}: {result!r}"
        if case.expect is not None:
            case.expect(result)

    def _assert_host_back(
        self, before: HostBaseline, pool_name: str, namespaces: list[str], closing: int
    ) -> None:
        for ns in namespaces:
            left = host_processes_in(ns, closing)
            assert not left, f"host processes outlived their sandbox ({ns}): {left}"
        table = snapshot()
        ours = {p for p in descendants(table, [os.getpid()]) if not table[p].zombie}
        new = ours - before.ours
        assert not new, f"new host processes of the test process remain: {sorted(new)}"
        if self.backend_name == "docker":
            left = self.docker.containers.list(all=True, sparse=True, filters={"label": f"gem-sandbox.pool={pool_name}"})
            assert not left, f"containers of pool {pool_name} outlived it: {[c.short_id for c in left]}"
        sysv = _host_sysv() - before.sysv
        assert not sysv, f"System V IPC objects of sandbox uids left on the host: {sorted(sysv)}"
        grown = _meminfo("Shmem") - before.shmem
        assert grown <= 64 * MIB, f"host Shmem grew by {grown // MIB} MiB and stayed"


def _innermost(group: BaseExceptionGroup) -> BaseException:
    while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
        group = group.exceptions[0]
    return group


# Forks children one at a time (each waits on a pipe) until fork fails or 3 x the limit.
LINEAR_FORKS = """
import os, sys
r, w = os.pipe()
forked = 0
for _ in range(@PIDS@ * 3):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    forked += 1
print(forked)
"""
