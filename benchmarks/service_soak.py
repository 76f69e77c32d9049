"""``python -m benchmarks.service_soak``: the pool service under a long, mixed load over HTTP.

Why: ``benchmarks/soak.py`` drives a pool in-process; trainers reach the pool through the
service, where answers cross HTTP, tokens share one pool, clients give up mid-run and the
Docker daemon may restart under it. For ``seconds`` (default 1,800), ``clients`` (default 16)
loopback clients under four tokens post calls, each client in turn:

* benign calls (:data:`benchmarks.soak.BENIGN`: a token no other call prints, an exit code
  chosen for it, and a look for an earlier tenant's leftovers), half to ``/v1/run`` and half
  to SandboxFusion's ``/run_code``, checked exactly: no answer is *lost*, another call's output
  or exit code is *misattributed*, a leftover seen is *dirty*; 503s and ``infra_error``
  (what trainers mask) are counted as *masked*;
* hostile payloads (``hostile`` share, default 10%: :data:`benchmarks.soak.HOSTILE`), counted;
* calls whose client disconnects (``abandon`` share, default 5%): a two-second run given up
  after a fraction of a second, so the service must cancel it and free its seat.

``restart_at`` (seconds into the soak; Docker only) restarts the Docker daemon once. Afterwards
every seat of the service's capacity must be free and nothing leased, and once the service and
its pool closed, no sandbox's process or container may be left on the host.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import anyio.to_thread

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.service import ServeOptions, TokenPolicy, running
from gem_sandbox.service.state import Service

from .report import machine
from .soak import BENIGN, EXIT_CODES, HOSTILE, HOSTILE_TIMEOUT, SPEC, _leftovers, _Recording, make_backend, rss_mb

TOKENS = tuple(TokenPolicy(name=f"soak-{n}", secret=f"soak-secret-{n}-{secrets.token_hex(8)}") for n in range(4))
ABANDONED = "import time\ntime.sleep(2)\nprint('not read')\n"
ABANDON_AFTER = 0.3  # seconds before an abandoning client disconnects
CLIENT_TIMEOUT = 60.0  # seconds any other client waits for its answer
PID_FILE = Path("/var/run/docker.pid")


@dataclass
class ServiceSoakReport:
    backend: str
    seconds: float
    clients: int
    calls: dict[str, Counter[str]] = field(default_factory=dict)  # kind -> outcome -> count
    lost: int = 0  # benign calls with no answer at all
    misattributed: int = 0  # benign answers with another stdout or exit code
    wrong_status: int = 0  # benign answers with the right output but the wrong status
    dirty: int = 0  # benign calls that found an earlier tenant's leftovers
    masked: int = 0  # benign calls answered 503 or infra_error (trainers mask these)
    abandoned: int = 0  # calls whose client disconnected mid-run
    seats_held_after: int = 0  # capacity units not given back once every client was done
    leased_after: int = 0  # sandboxes still leased from the pool then
    leaked_processes: int = 0
    leaked_containers: int = 0
    restarts: int = 0
    rss_before_mb: float = 0.0
    rss_after_mb: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def answered(self) -> int:
        return sum(sum(c.values()) for c in self.calls.values())

    @property
    def bad(self) -> int:
        wrong = self.lost + self.misattributed + self.wrong_status + self.dirty
        return wrong + self.seats_held_after + self.leased_after

    def tally(self, kind: str, outcome: str) -> None:
        self.calls.setdefault(kind, Counter())[outcome] += 1

    def fail(self, what: str) -> None:
        if len(self.failures) < 5:
            self.failures.append(what)


def _as_result(route: str, body: dict[str, Any]) -> tuple[str, str, int | None]:
    """(status, stdout, exit code) of an answer from either route, in ``ExecResult`` terms."""
    if route == "/v1/run":
        return body["status"], body["stdout"], body["exit_code"]
    if body["status"] == "SandboxError":
        return "infra_error", "", None
    run = body["run_result"] or {}
    status = {"Finished": "ok" if run.get("return_code") == 0 else "error", "TimeLimitExceeded": "timeout"}
    return status.get(run.get("status"), "infra_error"), run.get("stdout", ""), run.get("return_code")


async def _benign(session: aiohttp.ClientSession, rng: random.Random, report: ServiceSoakReport, n: int) -> None:
    token, code = f"tok-{n}-{secrets.token_hex(8)}", rng.choice(EXIT_CODES)
    route = rng.choice(("/v1/run", "/run_code"))
    body = {"code": BENIGN.format(token=token, code=code), "language": "python"}
    try:
        async with session.post(route, json=body) as response:
            answer = await response.json()
    except (aiohttp.ClientError, TimeoutError) as exc:
        report.lost += 1
        report.fail(f"{token}: no answer ({exc!r})")
        return
    if response.status in (429, 503):
        report.masked += 1
        report.tally("benign", str(response.status))
        return
    if response.status != 200:
        report.lost += 1
        report.fail(f"{token}: HTTP {response.status} {answer}")
        return
    status, stdout, exit_code = _as_result(route, answer)
    report.tally("benign", status)
    expected = "ok" if code == 0 else "error"
    if status == "infra_error":
        report.masked += 1
    elif stdout.startswith(token + " DIRTY"):
        report.dirty += 1
        report.fail(f"{token}: {stdout.strip()}")
    elif stdout != token + "\n" or exit_code != code:
        report.misattributed += 1
        report.fail(f"{token} (exit {code}): got {stdout[:200]!r}, exit {exit_code}")
    elif status != expected:
        report.wrong_status += 1
        report.fail(f"{token}: status {status}, expected {expected}")


async def _hostile(session: aiohttp.ClientSession, rng: random.Random, report: ServiceSoakReport) -> None:
    kind = rng.choice(sorted(HOSTILE))
    try:
        async with session.post("/v1/run", json={"code": HOSTILE[kind], "timeout": HOSTILE_TIMEOUT}) as response:
            answer = await response.json()
            report.tally(kind, answer["status"] if response.status == 200 else str(response.status))
    except (aiohttp.ClientError, TimeoutError) as exc:
        report.tally(kind, type(exc).__name__)


async def _abandon(session: aiohttp.ClientSession, report: ServiceSoakReport) -> None:
    with anyio.move_on_after(ABANDON_AFTER):
        async with session.post("/v1/run", json={"code": ABANDONED}) as response:
            await response.read()
            report.tally("abandoning", f"answered {response.status}")  # the run was quicker than the client
            return
    report.abandoned += 1
    report.tally("abandoning", "left")


async def _client(
    service: Service, index: int, deadline: float, hostile: float, abandon: float, report: ServiceSoakReport
) -> None:
    rng = random.Random(index)
    policy = TOKENS[index % len(TOKENS)]
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT)
    headers = {"Authorization": f"Bearer {policy.secret}"}
    n = 0
    while time.monotonic() < deadline:
        n += 1
        draw = rng.random()
        # A client that leaves drops its connection: a session of its own each time.
        async with aiohttp.ClientSession(service.url, headers=headers, timeout=timeout) as session:
            if draw < hostile:
                await _hostile(session, rng, report)
            elif draw < hostile + abandon:
                await _abandon(session, report)
            else:
                await _benign(session, rng, report, index * 1_000_000 + n)


def restart_dockerd() -> None:
    """Stop the Docker daemon (SIGTERM, as ``service docker restart`` does) and start it
    again with its own command line; back once it answers a ping."""
    import docker
    import docker.errors

    pid = int(PID_FILE.read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while _running(pid):
        if time.monotonic() > deadline:
            raise RuntimeError("dockerd did not stop within 60 s")
        time.sleep(0.1)
    with open("/var/log/dockerd.log", "ab") as log:
        subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            docker.from_env(timeout=5).ping()
            return
        except docker.errors.DockerException:
            if time.monotonic() > deadline:
                raise RuntimeError("dockerd did not come back within 60 s") from None
            time.sleep(0.2)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a daemon this process started is its child)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def service_soak(
    backend: str = "local",
    seconds: float = 1800.0,
    *,
    clients: int = 16,
    sandboxes: int = 8,
    hostile: float = 0.1,
    abandon: float = 0.05,
    restart_at: float | None = None,
) -> ServiceSoakReport:
    """The soak; ``restart_at`` needs the Docker backend and root."""
    if restart_at is not None and backend != "docker":
        raise ValueError("restarting the daemon needs the docker backend")
    report = ServiceSoakReport(backend, seconds, clients)
    recording = _Recording(make_backend(backend))
    # One run per sandbox: BENIGN's look for leftovers (other uids' processes, /tmp) would see
    # the neighbours a shared sandbox has by design.
    config = PoolConfig(min_idle=sandboxes, max_size=sandboxes, runs_per_sandbox=1, spec=SPEC)
    options = ServeOptions(host="127.0.0.1", port=0, backend=backend, tokens=TOKENS, queue_timeout=30.0)
    try:
        async with Runtime(recording, config) as runtime, running(options, runtime) as service:
            await runtime.wait_ready(timeout=300)
            report.rss_before_mb = rss_mb()
            deadline = time.monotonic() + seconds
            async with anyio.create_task_group() as tg:
                for index in range(clients):
                    tg.start_soon(_client, service, index, deadline, hostile, abandon, report)
                if restart_at is not None:
                    await anyio.sleep(restart_at)
                    await anyio.to_thread.run_sync(restart_dockerd)
                    report.restarts += 1
            await anyio.sleep(1.0)  # the last abandoned handlers' cancellations land
            report.rss_after_mb = rss_mb()
            report.seats_held_after = service.admission.capacity - service.admission.free
            report.leased_after = runtime.statistics().leased + len(service.leases)
    finally:
        await recording.aclose()
    report.leaked_processes, report.leaked_containers = await anyio.to_thread.run_sync(
        _leftovers, backend, recording.box_ids
    )
    return report


def print_report(r: ServiceSoakReport) -> None:
    print(f"\n### gem-sandbox service soak: {r.backend}, {r.seconds:g} s, {r.clients} clients, {len(TOKENS)} tokens\n")
    print(f"{machine()}\n")
    print("| measurement | value |")
    print("|---|---:|")
    rows = [
        ("calls answered or left", f"{r.answered:,}"),
        ("benign lost (no answer)", f"{r.lost:,}"),
        ("benign misattributed (stdout or exit code)", f"{r.misattributed:,}"),
        ("benign with a wrong status", f"{r.wrong_status:,}"),
        ("benign that found an earlier tenant's leftovers", f"{r.dirty:,}"),
        ("benign masked (503 or infra_error)", f"{r.masked:,}"),
        ("calls whose client disconnected mid-run", f"{r.abandoned:,}"),
        ("daemon restarts", f"{r.restarts}"),
        ("seats held / sandboxes leased after the clients left", f"{r.seats_held_after} / {r.leased_after}"),
        ("leaked host processes / containers after close", f"{r.leaked_processes} / {r.leaked_containers}"),
        ("service RSS before / after", f"{r.rss_before_mb:.1f} / {r.rss_after_mb:.1f} MB"),
        ("calls/s", f"{r.answered / r.seconds:,.1f}"),
    ]
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\n| kind | outcomes |")
    print("|---|---|")
    for kind in sorted(r.calls):
        print(f"| {kind} | " + ", ".join(f"{o} {n}" for o, n in r.calls[kind].most_common()) + " |")
    for failure in r.failures:
        print(f"\nbad benign answer: {failure}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["local", "docker"], default="local")
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--sandboxes", type=int, default=8)
    parser.add_argument("--hostile", type=float, default=0.1, help="share of hostile payloads")
    parser.add_argument("--abandon", type=float, default=0.05, help="share of calls whose client leaves mid-run")
    parser.add_argument("--restart-at", type=float, help="seconds in: restart dockerd once (docker, root)")
    args = parser.parse_args(argv)
    report = anyio.run(
        lambda: service_soak(
            args.backend,
            args.seconds,
            clients=args.clients,
            sandboxes=args.sandboxes,
            hostile=args.hostile,
            abandon=args.abandon,
            restart_at=args.restart_at,
        )
    )
    print_report(report)
    return 1 if report.bad or report.leaked_processes or report.leaked_containers else 0


if __name__ == "__main__":
    sys.exit(main())
