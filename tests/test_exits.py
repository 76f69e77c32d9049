"""However a process that used sandboxes ends, it ends promptly and leaves nothing running.

Each case runs a real script in a subprocess: it makes sandboxes through the process default
runtime (a tool's sync face) or through GEM's ``run_python`` after ``install()``, then ends
normally, by an exception, by ``SystemExit``, or by SIGINT or SIGTERM while a tool call is in
flight. The test records the sandboxes it saw while the script ran and requires that none is
left a few seconds after it ended: the exit hook closes hosted runtimes on the first three
paths and on SIGINT; SIGTERM with its default action runs no Python at all, so there the
sandboxes must end on their own when the stream to their host closes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from contextlib import closing

import pytest

from gem_sandbox.sandbox.backends.local import LocalBackend, bwrap_processes

ENDINGS = {  # what the script does once its sandboxes are up, and the exit status expected
    "normal": ("pass", 0),
    "exception": ("raise ValueError('the trainer crashed')", 1),
    "system_exit": ("raise SystemExit(3)", 3),
    "sigint": ("call('import time; time.sleep(60)')", -signal.SIGINT),  # re-raised after the exit hooks
    "sigterm": ("call('import time; time.sleep(60)')", -signal.SIGTERM),
}
ENTRIES = {  # how the script reaches sandboxes: a tool on the default runtime, or GEM's function
    "tool": """
        import gem_sandbox
        from gem_sandbox.tools.python_code_tool import PythonCodeTool
        gem_sandbox.configure(backend={backend!r}, min_idle=2, max_size=2)
        tool = PythonCodeTool(timeout=120)
        def call(code):
            return tool.execute_action(f"<python>{{code}}</python>")[2]
    """,
    "install": """
        from gem_sandbox.integrations.gem import install
        install(backend={backend!r}, min_idle=2, max_size=2)
        import gem.utils.sandbox
        def call(code):
            return gem.utils.sandbox.run_python(code, timeout=120)[1]
    """,
}
EXIT_WITHIN = 20.0  # seconds from the ending to the process gone
GONE_WITHIN = 10.0  # seconds from the process gone to its sandboxes gone


def _script(entry: str, backend: str, ending: str) -> str:
    body = textwrap.dedent(ENTRIES[entry].format(backend=backend))
    return body + textwrap.dedent(
        f"""
        assert "1" in call("print(1)")
        print("ready", flush=True)
        input()  # until the test has counted the sandboxes
        {ENDINGS[ending][0]}
        """
    )


def _docker_sandboxes(pid: int) -> Callable[[], set[str]]:
    from gem_sandbox.sandbox.backends.docker import DockerBackend
    from gem_sandbox.sandbox.backends.docker.reaping import OWNER_LABEL, owner_id

    if DockerBackend.check():
        pytest.skip(DockerBackend.check())
    import docker

    owner = owner_id(pid)

    def alive() -> set[str]:
        with closing(docker.from_env()) as client:
            found = client.containers.list(all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={owner}"})
        return {c.id for c in found}

    return alive


def _local_sandboxes(pid: int) -> Callable[[], set[str]]:
    if LocalBackend.check():
        pytest.skip(LocalBackend.check())
    boxes = {p.box for p in bwrap_processes() if p.ppid == pid}  # the launchers are its children

    def alive() -> set[str]:
        return boxes & {p.box for p in bwrap_processes()}

    return alive


def _end_and_count(entry: str, backend: str, ending: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _script(entry, backend, ending)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=30)[1]
        alive = (_docker_sandboxes if backend == "docker" else _local_sandboxes)(proc.pid)
        seen = alive()
        assert seen, "the script made no sandbox to leave behind"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        if ending in ("sigint", "sigterm"):
            time.sleep(0.5)  # into the tool call
            os.kill(proc.pid, signal.SIGINT if ending == "sigint" else signal.SIGTERM)
        started = time.monotonic()
        stderr = proc.stderr.read() if proc.stderr else ""
        proc.wait(timeout=60)
        assert time.monotonic() - started < EXIT_WITHIN, "the process hung at exit"
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == ENDINGS[ending][1], stderr
    deadline = time.monotonic() + GONE_WITHIN
    while (left := alive()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"{len(left)} of {len(seen)} sandboxes outlived their process"


@pytest.mark.slow
@pytest.mark.parametrize("ending", ENDINGS)
def test_a_process_on_local_sandboxes_ends_and_leaves_none(ending: str):
    _end_and_count("tool", "local", ending)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("ending", ENDINGS)
def test_a_process_on_docker_sandboxes_ends_and_leaves_none(entry: str, ending: str):
    _end_and_count(entry, "docker", ending)
