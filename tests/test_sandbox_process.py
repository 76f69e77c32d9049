"""The process backend: the agent as a plain host process, in token mode when not root,
and on the oldest Python the agent supports."""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterator

import pytest

from gem_sandbox.agent import ipc
from gem_sandbox.sandbox.backends.local import ProcessBackend
from gem_sandbox.sandbox.backends.local import process as local
from gem_sandbox.sandbox.client import open_sandbox
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import SPEC, host_processes_matching, until_host_processes_match

pytestmark = pytest.mark.anyio

PYTHON38 = "/root/.pyenv/versions/3.8.18/bin/python"
SYSTEM_PYTHON = "/usr/bin/python3"


async def test_it_warns_once_that_it_is_not_a_security_boundary(monkeypatch, caplog):
    monkeypatch.setattr(local, "_warned", False)
    with caplog.at_level(logging.WARNING, logger=local.__name__):
        for _ in range(2):
            async with open_sandbox(ProcessBackend(), SPEC) as sb:
                assert (await sb.run("print(1)")).stdout == "1\n"
    warnings = [r for r in caplog.records if "NOT a security boundary" in r.getMessage()]
    assert len(warnings) == 1


async def test_its_work_dir_is_removed_on_close():
    async with open_sandbox(ProcessBackend(), SPEC) as sb:
        workdir = sb.hello["workdir"]
        await sb.write_files({"f": "x"})
    assert not os.path.exists(workdir)


@pytest.fixture
def nobody() -> int:
    if os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs root to start the agent as another user, and /usr/bin/python3")
    return 65534


async def test_a_non_root_agent_uses_token_mode_and_still_kills_escapes(nobody: int):
    async with open_sandbox(ProcessBackend(python=SYSTEM_PYTHON, user=nobody), SPEC) as sb:
        assert sb.hello["isolation"] == "token"
        result = await sb.run("setsid sleep 321 & (sleep 322 &); sleep 323", "bash", timeout=0.5)
        assert result.status is Status.TIMEOUT
        assert host_processes_matching("sleep 32") == []


async def test_a_non_root_agent_reset_kills_processes_that_shed_their_token(nobody: int):
    async with open_sandbox(ProcessBackend(python=SYSTEM_PYTHON, user=nobody), SPEC) as sb:
        await sb.shell("env -i setsid sleep 331 &")
        await until_host_processes_match("sleep 331", 1)
        await sb.reset()
        assert host_processes_matching("sleep 331") == []


async def test_the_agent_runs_on_python_3_8():
    if not os.access(PYTHON38, os.X_OK):
        pytest.skip(f"no Python 3.8 at {PYTHON38}")
    async with open_sandbox(ProcessBackend(python=PYTHON38), SPEC) as sb:
        assert sb.hello["python"].startswith("3.8.")
        assert (await sb.run("import sys; print(sys.version_info[:2])")).stdout == "(3, 8)\n"
        assert (await sb.run("print(1/0)")).stderr.endswith("ZeroDivisionError: division by zero\n")
        assert (await sb.kernel_exec("x = 2\nx * 21")).stdout == "42\n"
        assert (await sb.shell("echo $((6 * 7))")).stdout == "42\n"
        await sb.write_files({"f.txt": "x"})
        assert await sb.read_files(["f.txt"]) == {"f.txt": b"x"}
        await sb.reset()


MAKE_SEGMENT = "import ctypes; print(ctypes.CDLL(None).shmget(0, 4096, 0o1000 | 0o600))"


@pytest.fixture
def foreign_ipc() -> Iterator[set[tuple[str, int]]]:
    """System V IPC objects other software holds in the host's namespace (made here, by this
    test process's uid, which is no run's), removed afterwards: ``{(kind, id)}``."""
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_private, ipc_creat = 0, 0o1000
    made = {
        ("shm", libc.shmget(ipc_private, 4096, ipc_creat | 0o600)),
        ("sem", libc.semget(ipc_private, 1, ipc_creat | 0o600)),
        ("msg", libc.msgget(ipc_private, ipc_creat | 0o600)),
    }
    try:
        assert all(ident >= 0 for _, ident in made), f"could not make System V objects: {made}"
        yield made
    finally:
        remove = {
            "shm": lambda ident: libc.shmctl(ident, ipc.IPC_RMID, None),
            "sem": lambda ident: libc.semctl(ident, 0, ipc.IPC_RMID),
            "msg": lambda ident: libc.msgctl(ident, ipc.IPC_RMID, None),
        }
        for kind, ident in made:
            if ident >= 0:
                remove[kind](ident)


@pytest.mark.parametrize("as_nobody", [False, True], ids=["root_uid_mode", "nobody_token_mode"])
async def test_its_reset_and_clean_check_count_only_the_ipc_objects_its_runs_made(
    foreign_ipc: set[tuple[str, int]], as_nobody: bool
) -> None:
    if as_nobody and (os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK)):
        pytest.skip("needs root to start the agent as another user, and /usr/bin/python3")
    backend = ProcessBackend(python=SYSTEM_PYTHON, user=65534) if as_nobody else ProcessBackend()
    async with open_sandbox(backend, SPEC) as sb:
        result, clean = await sb.run_stateless("print(1)")
        assert (result.status, clean) == (Status.OK, True)
        made = await sb.run(MAKE_SEGMENT)
        assert made.status is Status.OK and int(made.stdout) >= 0, made
        await sb.reset()
    left = set((kind, ident) for kind, ident, _ in ipc.objects())
    assert ("shm", int(made.stdout)) not in left, "the run's own segment outlived the reset"
    assert foreign_ipc <= left, "the sandbox removed System V objects it did not make"
