"""``python -m benchmarks.soak``: many runs through one pool, benign and hostile mixed.

Why: a pool that is fast for a minute can still lose results, hand one caller another's
output, leak processes or containers, or grow without bound over hours of RL training. The
soak drives ``runs`` calls (default 20,000) from ``callers`` concurrent tasks over a pool of
``sandboxes`` and checks every benign call exactly:

* each benign payload prints a token no other call prints and exits with a code chosen for
  it; its result must be ``ok``/``error`` to match, with exactly that stdout and exit code
  (else it is *misattributed*; no result or ``infra_error`` is *lost*);
* each benign payload also looks for what an earlier tenant could have left (files in the
  work dir or ``/tmp``, SysV shm segments, processes of another uid) and reports it as
  *dirty*;
* hostile payloads (``hostile`` share, default 10%) try to break the sandbox: a fork bomb
  against a small pids limit, a memory bomb, an output flood, a busy loop past its timeout,
  a ``setsid`` orphan, a SysV shm segment and files in ``/tmp`` left behind. Their statuses
  are counted, not judged.

After the pool closes, every sandbox it launched must be gone from the host (no bwrap
process, no container). The supervisor's (this process's) RSS is compared between the end of
the warm-up and the end of the soak. The baseline, run first in the same process on the
same pool, is benign calls only: the ratio shows what the hostile share costs in throughput.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import secrets
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.pool import PoolConfig, SandboxPool
from gem_sandbox.sandbox.result import ExecResult, Status

from .report import machine

SPEC = SandboxSpec(memory_mb=512, pids=64, workdir_mb=64, tmp_mb=64)  # small pids: fork bombs end fast
HOSTILE_TIMEOUT = 2.0

# Prints the token (and what an earlier tenant left, if anything), then exits with the code.
BENIGN = """\
import os, sys
dirty = []
if os.listdir('.'): dirty.append('work')
if os.listdir('/tmp'): dirty.append('tmp')
if open('/proc/sysvipc/shm').read().splitlines()[1:]: dirty.append('shm')
me = os.getuid()
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        uid = int(next(l for l in open(f'/proc/{{pid}}/status') if l.startswith('Uid:')).split()[1])
    except (OSError, StopIteration):
        continue
    if uid not in (0, me): dirty.append('procs'); break
print({token!r} + (' DIRTY ' + ','.join(dirty) if dirty else ''))
sys.exit({code})
"""

HOSTILE: dict[str, str] = {
    "fork_bomb": (
        "import os, time\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        time.sleep(0.01)\n"
    ),
    "memory_bomb": "chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))\n",
    "output_flood": "import sys\nchunk = 'x' * 65536\nwhile True:\n    sys.stdout.write(chunk)\n",
    "timeout_loop": "while True:\n    pass\n",
    "setsid_orphan": (
        "import subprocess\n"
        "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"  # keeps stdout open
        "print('left an orphan')\n"
    ),
    "sysv_shm": (
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "assert libc.shmget(0, 1 << 20, 0o1666) >= 0\n"  # IPC_PRIVATE, IPC_CREAT | 0666
    ),
    "tmp_files": (
        "import os\n"
        "for n in range(20):\n"
        "    open(f'/tmp/junk-{n}', 'wb').write(os.urandom(4096))\n"
        "open('left-behind.txt', 'w').write('x')\n"
    ),
}
EXIT_CODES = (0, 0, 0, 0, 1, 2, 3, 42, 255)


@dataclass(frozen=True)
class Call:
    kind: str  # "benign" or a key of HOSTILE
    code: str
    token: str = ""
    exit_code: int = 0
    timeout: float | None = None


def plan(runs: int, hostile: float, rng: random.Random) -> list[Call]:
    calls = []
    for i in range(runs):
        if rng.random() < hostile:
            kind = rng.choice(sorted(HOSTILE))
            calls.append(Call(kind, HOSTILE[kind], timeout=HOSTILE_TIMEOUT))
        else:
            token, code = f"tok-{i}-{secrets.token_hex(8)}", rng.choice(EXIT_CODES)
            calls.append(Call("benign", BENIGN.format(token=token, code=code), token, code))
    return calls


@dataclass
class SoakReport:
    backend: str
    runs: int
    seconds: float
    statuses: dict[str, Counter[str]]  # kind -> status -> count
    lost: int  # benign calls with no result (an exception, or infra_error)
    misattributed: int  # benign results whose stdout or exit code is not what the call sent
    wrong_status: int  # benign results with the right output but not ok/error as expected
    dirty: int  # benign calls that found an earlier tenant's leftovers
    leaked_processes: int  # host processes of this pool's sandboxes left after close
    leaked_containers: int
    rss_before_mb: float
    rss_after_mb: float
    baseline_runs_per_s: float
    launched: int
    replacements: int
    failures: list[str] = field(default_factory=list)  # the first few bad benign results

    @property
    def runs_per_s(self) -> float:
        return self.runs / self.seconds

    def count(self, status: Status, *, benign: bool) -> int:
        return sum(c[status.value] for kind, c in self.statuses.items() if (kind == "benign") == benign)


class _Recording(Backend):
    """The backend, remembering every box it launched: what must be gone after close."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.box_ids: list[str] = []

    @classmethod
    def check(cls) -> str | None:
        return None

    async def launch(self, spec: SandboxSpec) -> Box:
        box = await self.inner.launch(spec)
        self.box_ids.append(box.id)
        return box

    async def reap_orphans(self, pool_label: str | None = None) -> int:
        return await self.inner.reap_orphans(pool_label)

    async def aclose(self) -> None:
        await self.inner.aclose()


def make_backend(name: str) -> Backend:
    if name == "local":
        from gem_sandbox.sandbox.backends.local import LocalBackend

        return LocalBackend()
    if name == "docker":
        from gem_sandbox.sandbox.backends.docker import DockerBackend

        return DockerBackend()
    raise ValueError(f"unknown backend {name!r}; choose local or docker")


def rss_mb() -> float:
    gc.collect()
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def _leftovers(backend: str, box_ids: list[str]) -> tuple[int, int]:
    """(host processes, containers) of these boxes still present."""
    ids = set(box_ids)
    if backend == "local":
        from gem_sandbox.sandbox.backends.local import bwrap_processes

        return sum(p.box in ids for p in bwrap_processes()), 0
    import docker

    client = docker.from_env(timeout=60)
    try:
        # The low-level listing: containers.list() inspects each container it found, which
        # races other pools removing theirs (404).
        containers = client.api.containers(all=True, filters={"label": "gem-sandbox.owner"})
        return _in_cgroups_of(ids), sum(c["Id"] in ids for c in containers)
    finally:
        client.close()


def _in_cgroups_of(container_ids: set[str]) -> int:
    """Host processes still in one of these containers' cgroups."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                cgroup = f.read()
        except OSError:
            continue
        found += any(container_id in cgroup for container_id in container_ids)
    return found


class _Tally:
    def __init__(self) -> None:
        self.statuses: dict[str, Counter[str]] = {}
        self.lost = self.misattributed = self.wrong_status = self.dirty = 0
        self.failures: list[str] = []

    def record(self, call: Call, result: ExecResult | None, error: BaseException | None) -> None:
        status = "exception" if result is None else result.status.value
        self.statuses.setdefault(call.kind, Counter())[status] += 1
        if call.kind != "benign":
            return
        expected = Status.OK if call.exit_code == 0 else Status.ERROR
        if result is None or result.status is Status.INFRA_ERROR:
            self.lost += 1
        elif result.stdout.startswith(call.token + " DIRTY"):
            self.dirty += 1
        elif result.stdout != call.token + "\n" or result.exit_code != call.exit_code:
            self.misattributed += 1
        elif result.status is not expected:
            self.wrong_status += 1
        else:
            return
        if len(self.failures) < 5:
            got = repr(error) if result is None else repr(result)[:600]
            self.failures.append(f"{call.token} (exit {call.exit_code}): {got}")


async def _drive(pool: SandboxPool, calls: Sequence[Call], callers: int, tally: _Tally) -> float:
    """Run every call from ``callers`` tasks; the seconds it took."""
    queue = iter(calls)

    async def caller() -> None:
        for call in queue:  # one shared iterator: each call is taken by exactly one caller
            try:
                result = await pool.run(call.code, timeout=call.timeout)
            except Exception as exc:
                tally.record(call, None, exc)
            else:
                tally.record(call, result, None)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    return time.perf_counter() - start


async def soak(
    backend: str = "local",
    runs: int = 20_000,
    *,
    sandboxes: int = 8,
    callers: int = 16,
    hostile: float = 0.1,
    seed: int = 0,
    baseline_runs: int | None = None,
) -> SoakReport:
    rng = random.Random(seed)
    recording = _Recording(make_backend(backend))
    config = PoolConfig(min_idle=sandboxes, max_size=sandboxes, acquire_timeout=300.0, spec=SPEC)
    baseline_runs = baseline_runs if baseline_runs is not None else max(200, runs // 20)
    try:
        async with SandboxPool(recording, config) as pool:
            await pool.wait_ready(timeout=300)
            warmup = _Tally()  # benign only: also the throughput baseline
            baseline_s = await _drive(pool, plan(baseline_runs, 0.0, rng), callers, warmup)
            calls = plan(runs, hostile, rng)  # made before measuring: it is not the pool's memory
            rss_before = rss_mb()
            tally = _Tally()
            seconds = await _drive(pool, calls, callers, tally)
            rss_after = rss_mb()
            stats = pool.statistics()  # as the soak left it, before closing changes it
    finally:
        await recording.aclose()
    processes, containers = await anyio.to_thread.run_sync(_leftovers, backend, recording.box_ids)
    return SoakReport(
        backend=backend,
        runs=runs,
        seconds=seconds,
        statuses=tally.statuses,
        lost=tally.lost + warmup.lost,
        misattributed=tally.misattributed + warmup.misattributed,
        wrong_status=tally.wrong_status + warmup.wrong_status,
        dirty=tally.dirty + warmup.dirty,
        leaked_processes=processes,
        leaked_containers=containers,
        rss_before_mb=rss_before,
        rss_after_mb=rss_after,
        baseline_runs_per_s=baseline_runs / baseline_s,
        launched=stats.launched,
        replacements=stats.replacements,
        failures=warmup.failures + tally.failures,
    )


def print_report(report: SoakReport, sandboxes: int, callers: int) -> None:
    r = report
    print(f"\n### gem-sandbox soak: {r.backend}, {r.runs:,} runs, {sandboxes} sandboxes, {callers} callers\n")
    print(f"{machine()}\n")
    print("| measurement | value | baseline | ratio |")
    print("|---|---:|---:|---:|")
    rows: list[tuple[str, str, str, str]] = [
        ("runs (benign / hostile)", f"{sum(r.statuses.get('benign', Counter()).values()):,} / "
         f"{sum(sum(c.values()) for k, c in r.statuses.items() if k != 'benign'):,}", "-", "-"),
    ]
    for status in Status:
        benign, hostile = r.count(status, benign=True), r.count(status, benign=False)
        rows.append((f"status {status.value} (benign / hostile)", f"{benign:,} / {hostile:,}", "-", "-"))
    exceptions = sum(c["exception"] for c in r.statuses.values())
    rows += [
        ("raised instead of a result", f"{exceptions:,}", "-", "-"),
        ("benign lost (no result or infra_error)", f"{r.lost:,}", "-", "-"),
        ("benign misattributed (stdout or exit code)", f"{r.misattributed:,}", "-", "-"),
        ("benign with a wrong status", f"{r.wrong_status:,}", "-", "-"),
        ("benign that found an earlier tenant's leftovers", f"{r.dirty:,}", "-", "-"),
        ("leaked host processes after close", f"{r.leaked_processes:,}", "-", "-"),
        ("leaked containers after close", f"{r.leaked_containers:,}", "-", "-"),
        ("sandboxes launched / replaced", f"{r.launched:,} / {r.replacements:,}", "-", "-"),
        ("supervisor RSS before / after", f"{r.rss_before_mb:.1f} / {r.rss_after_mb:.1f} MB", "-", "-"),
        ("supervisor RSS growth", f"{r.rss_after_mb - r.rss_before_mb:+.1f} MB "
         f"({(r.rss_after_mb / r.rss_before_mb - 1) * 100:+.1f}%)", "-", "-"),
        ("runs/s", f"{r.runs_per_s:,.0f}", f"{r.baseline_runs_per_s:,.0f} (benign only)",
         f"{r.runs_per_s / r.baseline_runs_per_s:.2f}x"),
    ]
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\n| hostile payload | runs | statuses |")
    print("|---|---:|---|")
    for kind in sorted(k for k in r.statuses if k != "benign"):
        counts = r.statuses[kind]
        shown = ", ".join(f"{s} {n}" for s, n in counts.most_common())
        print(f"| {kind} | {sum(counts.values())} | {shown} |")
    for failure in r.failures:
        print(f"\nbad benign result: {failure}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--backend", choices=["local", "docker"], default="local")
    parser.add_argument("--sandboxes", type=int, default=8)
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--hostile", type=float, default=0.1, help="share of hostile payloads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    report = anyio.run(
        lambda: soak(
            args.backend, args.runs, sandboxes=args.sandboxes, callers=args.callers,
            hostile=args.hostile, seed=args.seed,
        )
    )
    print_report(report, args.sandboxes, args.callers)
    bad = report.lost + report.misattributed + report.wrong_status + report.dirty
    return 1 if bad or report.leaked_processes or report.leaked_containers else 0


if __name__ == "__main__":
    sys.exit(main())
