"""Scoring a terminal episode: the task's tests, run where nothing the model did can reach them.

The model worked in its episode sandbox; the tests never went there. When the episode ends:

1. its work product, the regular files and directories under the work dir (``/app``), with
   their exec bits, is read out of the episode sandbox as data;
2. a *fresh* sandbox is leased for the verdict: it never ran a model command, so a replaced
   ``pytest``, a planted result file, a background process or anything else outside the work
   dir did not come along; the work product is written into its work dir;
3. a harness kernel (:mod:`.harness`, its own uid) lays out the tests, read-only, and the
   verdict files, fifos that only it reads;
4. the tests run as another uid, with the image's interpreters and no path, plugin, ini or
   conftest from the work dir: Terminal-Bench's pytest files under :mod:`.pytest_runner`,
   Harbor's ``tests/test.sh`` as Harbor runs it;
5. the harness reads what reached the verdict files. The verdict is that, from the harness's
   own stdout, and the test run's status as the agent saw it: never the tests' output.

A program the tests run shares their uid and can write to the fifos too, but cannot make the
verdict its own: the runner's report must start with a token from the host that no other
process holds, and a Harbor reward must arrive in one write, so a second report, a flood, or a
prefix for the real verdict to complete voids it (``error``). What it still could do is ptrace
Harbor's ``test.sh`` or its pytest, ordinary dumpable processes, and change what they write;
the runner is undumpable and safe from that. See SECURITY.md.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import secrets
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import FileTransferError, SandboxError, UnsafePath
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox_envs.code.outcome import Category, Outcome, failure_of
from gem_sandbox_envs import sandbox_code

from .tasks import TerminalTask

MAX_PRODUCT_BYTES = 64 << 20  # the work product carried to the verifier
MAX_PRODUCT_FILES = 20_000
READ_CHUNK_BYTES = 24 << 20  # below the agent's 32 MiB per read
BOOT_TIMEOUT = 30.0
PYTEST_CHANNEL = "pytest.json"
HARBOR_CHANNELS = ("reward.txt", "reward.json")
# The test run's environment: the image's tools on PATH (set by the agent), no user site, no
# script or working dir on Python's path, a home that holds nothing.
TEST_ENV = {
    "PYTHONSAFEPATH": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "HOME": "/tmp/gem-sandbox-home",
    "TEST_DIR": "/tests",
}
_LISTING = "find . -mindepth 1 -xdev \\( -type f -o -type d \\) -printf '%y %m %s %P\\0'"
_LISTING_LIMITS = RunLimits(max_output_bytes=8 << 20)


class Received(TypedDict):
    """What the harness saw arrive at one verdict fifo."""

    text: str
    writes: int


OUTCOMES = frozenset({"passed", "failed", "error", "skipped"})  # the runner's words


class VerifierUnavailable(SandboxError, RuntimeError):
    """The backend cannot verify a terminal task: its runs share one uid, so the tests' verdict
    files and harness could be reached by the programs the tests run."""


@dataclass(frozen=True)
class Verdict:
    """The episode's reward and how it was reached (``outcome.info()`` goes into ``info``)."""

    reward: float
    outcome: Outcome


@dataclass
class WorkProduct:
    """What the model left in its work dir: files (path -> content), which of them are
    executable, and every directory (empty ones too)."""

    files: dict[str, bytes] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)
    directories: list[str] = field(default_factory=list)


async def work_product(sandbox: Sandbox) -> WorkProduct:
    """The regular files and directories under the episode sandbox's work dir. Raises
    :class:`WorkProductError` (the model's doing) when they cannot all be carried."""
    listing = await sandbox.run(_LISTING, language="bash", timeout=30, limits=_LISTING_LIMITS)
    if listing.status is not Status.OK or listing.truncated:
        raise WorkProductError(f"the work dir could not be listed ({listing.status.value})")
    entries = [entry for entry in listing.stdout.split("\0") if entry]
    if len(entries) > MAX_PRODUCT_FILES:
        raise WorkProductError(f"the work dir holds over {MAX_PRODUCT_FILES} files")
    product = WorkProduct()
    sizes: dict[str, int] = {}
    for entry in entries:
        kind, mode, size, path = entry.split(" ", 3)
        if kind == "d":
            product.directories.append(path)
            continue
        sizes[path] = int(size)
        if int(mode, 8) & 0o111:
            product.executable.add(path)
    if sum(sizes.values()) > MAX_PRODUCT_BYTES:
        raise WorkProductError(f"the work dir holds over {MAX_PRODUCT_BYTES >> 20} MiB")
    for chunk in _chunks(sizes):
        try:
            product.files.update(await sandbox.read_files(chunk))
        except (FileTransferError, SandboxError) as exc:
            if not sandbox.alive:
                raise
            raise WorkProductError(f"the work dir changed or holds something unreadable: {exc}") from None
    return product


class WorkProductError(Exception):
    """The model left a work dir that cannot be carried to the verifier (too large, links,
    files changing under the copy): its failure, scored as ``error``."""


def _chunks(sizes: Mapping[str, int]) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    budget = READ_CHUNK_BYTES
    for path, size in sizes.items():
        if chunks[-1] and size > budget:
            chunks.append([])
            budget = READ_CHUNK_BYTES
        chunks[-1].append(path)
        budget -= size
    return [chunk for chunk in chunks if chunk]


async def verify(runtime: Runtime, task: TerminalTask, product: WorkProduct, reward: str) -> Verdict:
    """Run ``task``'s tests against ``product`` in a fresh sandbox of ``runtime``."""
    async with runtime.lease() as sandbox:
        if sandbox.hello.get("isolation") != "uid":
            raise VerifierUnavailable(
                f"sandbox {sandbox.id} ({sandbox.backend}) runs every run as one uid, so the "
                "programs a task's tests run could reach its verdict; use Docker"
            )
        try:
            await sandbox.write_files(product.files, executable=product.executable, directories=product.directories)
        except (FileTransferError, UnsafePath) as exc:  # what the model named or made, refused
            raise WorkProductError(f"the work dir could not be written for the tests: {exc}") from None
        harbor = task.format == "harbor"
        channels = HARBOR_CHANNELS if harbor else (PYTEST_CHANNEL,)
        boot = await sandbox.kernel_exec(_prepare_cell(task, channels), kernel="verifier", timeout=BOOT_TIMEOUT)
        if not boot.ok or boot.stdout.strip() != "ready":  # before any of the model's code ran
            raise SandboxError(f"the verifier harness did not start: {boot.status.value} {boot.stderr[-500:]}")
        token = secrets.token_hex(16)
        env = {**TEST_ENV, "VERIFIER_TOKEN": token} if not harbor else TEST_ENV
        run = await sandbox.run(_test_command(harbor), language="bash", timeout=task.test_timeout, env=env)
        collected = await sandbox.kernel_exec("collect()", kernel="verifier", timeout=BOOT_TIMEOUT)
    if run.status is Status.INFRA_ERROR:
        return Verdict(0.0, Outcome(Category.INFRA_ERROR, 0, 0, detail=run.stderr.strip()))
    if not _ended_by_itself(run):
        return Verdict(0.0, Outcome(failure_of(run), 0, 0, detail=f"the test run ended {run.status.value}"))
    if not collected.ok:
        # The sandbox is alive (a dead one raised), so what stopped the harness came from the
        # test run: the model's programs, say, starving it. Not the infrastructure's failure.
        detail = f"the verifier harness ended {collected.status.value} after the tests ran"
        return Verdict(0.0, Outcome(Category.ERROR, 0, 0, detail=detail))
    written: dict[str, Received | None] = json.loads(collected.stdout)
    if harbor:
        return _harbor_verdict(written)
    return _pytest_verdict(written.get(PYTEST_CHANNEL), token, task, reward)


def _prepare_cell(task: TerminalTask, channels: tuple[str, ...]) -> str:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for path, data in task.tests.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o755 if path.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    tests = base64.b64encode(archive.getvalue()).decode()
    runner = sandbox_code.source(__package__, "pytest_runner.py")
    harness = "\n".join([sandbox_code.isolation(), sandbox_code.source(__package__, "harness.py")])
    return f"{harness}\nprepare({tests!r}, {runner!r}, {list(channels)!r})\n"


def _test_command(harbor: bool) -> str:
    """From ``/app``, as both formats run their tests; bash without any startup file."""
    if harbor:
        return "cd /app && exec bash --noprofile --norc /tests/test.sh"
    return "cd /app && exec /usr/bin/python3 -I /tmp/gem-sandbox-verifier/runner.py"


def _ended_by_itself(run: ExecResult) -> bool:
    """Exited, zero or not (a failing test exits 1); not killed, timed out or out of memory."""
    return run.status in (Status.OK, Status.ERROR) or (run.status is Status.OUTPUT_LIMIT and run.exit_code is not None)


def _pytest_verdict(received: Received | None, token: str, task: TerminalTask, reward: str) -> Verdict:
    tests = _report(received, token)
    if tests is None:
        return Verdict(0.0, Outcome(Category.ERROR, 0, 0, detail="no report from the test runner alone"))
    if not tests:
        return Verdict(0.0, Outcome(Category.ERROR, 0, 0, detail="the tests collected nothing"))
    passed = [test for test, outcome in tests.items() if outcome == "passed"]
    weights = {test: task.test_weights.get(_test_name(test), 1.0) for test in tests}
    total_weight = sum(weights.values())
    fraction = sum(weights[test] for test in passed) / total_weight if total_weight else 0.0
    everything = len(passed) == len(tests)
    outcome = Outcome(
        Category.OK if everything else Category.WRONG_ANSWER,
        len(passed),
        len(tests),
        detail="" if everything else "failed: " + ", ".join(t for t in tests if t not in passed)[:500],
    )
    score = fraction if reward == "fraction" else float(everything)
    return Verdict(score, outcome)


def _report(received: Received | None, token: str) -> dict[str, str] | None:
    """The runner's ``{test: outcome}``: the fifo must hold its token, then one JSON report
    and nothing else; None for anything another writer touched (or no report at all)."""
    text = received["text"] if received is not None else ""
    if not text.startswith(token):
        return None
    try:
        report = json.loads(text[len(token) :])
    except ValueError:
        return None
    tests = report.get("tests") if isinstance(report, dict) and set(report) == {"exit", "tests"} else None
    if not isinstance(tests, dict) or not all(isinstance(v, str) and v in OUTCOMES for v in tests.values()):
        return None
    return {str(test): outcome for test, outcome in tests.items()}


def _test_name(nodeid: str) -> str:
    """``test_outputs.py::test_sorted[3]`` -> ``test_sorted``, the key of ``test_weights``."""
    return re.sub(r"\[.*\]$", "", nodeid.rpartition("::")[2])


def _harbor_verdict(written: Mapping[str, Received | None]) -> Verdict:
    given = {name: got for name, got in written.items() if got is None or got["text"].strip()}
    if not given:
        return Verdict(0.0, Outcome(Category.ERROR, 0, 1, detail="test.sh wrote no reward"))
    if len(given) > 1:
        return Verdict(0.0, Outcome(Category.ERROR, 0, 1, detail="rewards written to both reward.txt and reward.json"))
    ((name, got),) = given.items()
    value = _reward_value(name, got["text"]) if got is not None and got["writes"] == 1 else None
    if value is None:
        return Verdict(0.0, Outcome(Category.ERROR, 0, 1, detail=f"{name} does not hold one reward in one write"))
    category = Category.OK if value >= 1.0 else Category.WRONG_ANSWER
    return Verdict(value, Outcome(category, int(value >= 1.0), 1))


def _reward_value(name: str, text: str) -> float | None:
    """reward.txt: one number; reward.json: one object, its ``reward`` (or its one number)."""
    try:
        if name == "reward.txt":
            value: Any = float(text.strip())
        else:
            data = json.loads(text)
            numbers = {k: v for k, v in data.items() if isinstance(v, (int, float))}
            value = data.get("reward", next(iter(numbers.values())) if len(numbers) == 1 else None)
    except (ValueError, AttributeError):
        return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)
