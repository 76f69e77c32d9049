"""Terminal tasks: both task formats, every shipped task solved and failed on Docker, and a
model that tries to edit, skip or fake the tests from inside its episode."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gem_sandbox import make
from gem_sandbox.registry import registered_envs
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox_envs.code.base import TERMINAL_STATE
from gem_sandbox_envs.terminal import shipped_names
from gem_sandbox_envs.terminal.env import TerminalEnv, solution_action
from gem_sandbox_envs.terminal.images import TaskImageUnavailable, task_tag
from gem_sandbox_envs.terminal.tasks import TaskError, load_task, load_tasks, shipped_tasks
from tests.docker_fixtures import sandbox_image, docker_client  # noqa: F401  (fixtures)
from tests.tool_fixtures import SPEC, make_backend

pytestmark = pytest.mark.anyio

TASKS = {task.name: task for task in shipped_tasks()}
HARBOR_TASK = "fix-stats-script"  # its test.sh runs the model's /app/stats.sh
PYTEST_TASK = "fix-fibonacci"  # its tests run the model's /app/fib.py


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def runtime(sandbox_image: str) -> AsyncIterator[Runtime]:  # noqa: F811
    backend = make_backend("docker")
    async with Runtime(backend, PoolConfig(min_idle=2, max_size=4, run_timeout=30, spec=SPEC)) as rt:
        await rt.wait_ready()
        yield rt
    await backend.aclose()


async def play(runtime: Runtime, task: str, *commands: str) -> tuple[float, dict]:
    """Reset to ``task``, run ``commands`` as the model would, finish; (reward, info)."""
    env = TerminalEnv(task=task, runtime=runtime)
    try:
        await env.areset()
        for command in commands:
            obs, reward, terminated, _, info = await env.astep(command)
            assert not terminated, info
            assert obs.startswith("<bash_output>")
        obs, reward, terminated, truncated, info = await env.astep("<finish>done</finish>")
        assert (obs, terminated) == (TERMINAL_STATE, True)
        return reward, info
    finally:
        await env.aclose()


def bash(script: str) -> str:
    return f"<bash>{textwrap.dedent(script).strip()}</bash>"


# --- loading --------------------------------------------------------------------------------


def test_ten_shipped_tasks_in_both_formats_each_with_a_solution():
    assert len(TASKS) >= 10
    assert {task.format for task in TASKS.values()} == {"terminal-bench", "harbor"}
    assert {task.difficulty for task in TASKS.values()} >= {"easy", "medium", "hard"}
    for task in TASKS.values():
        assert task.solution and task.instruction.strip() and task.tests
        assert not task.own_image, f"{task.name} should run on the project image"


def test_every_shipped_task_has_an_id():
    assert sorted(shipped_names()) == sorted(TASKS)
    for name in TASKS:
        assert f"terminal:{name}" in registered_envs()
    assert "terminal:Shipped-v0" in registered_envs()


def test_directories_that_are_not_tasks_are_refused(tmp_path: Path):
    with pytest.raises(TaskError, match="neither task.toml"):
        load_task(tmp_path)
    with pytest.raises(TaskError, match="no Terminal-Bench or Harbor task"):
        load_tasks(tmp_path)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "task.toml").write_text("[metadata]\n")
    with pytest.raises(TaskError, match="no instruction.md"):
        load_tasks(tmp_path)


def test_terminal_bench_solution_yaml_becomes_one_script(tmp_path: Path):
    source = Path(TASKS["log-errors"].dockerfile).parent
    task_dir = tmp_path / "log-errors"
    shutil.copytree(source, task_dir)
    (task_dir / "solution.sh").unlink()
    (task_dir / "solution.yaml").write_text("- command: echo one\n- command: echo two\n  min_timeout_sec: 5\n")
    assert load_task(task_dir).solution == "echo one\necho two\n"


# --- every shipped task, on Docker ------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(TASKS))
async def test_reference_solution_passes_and_an_empty_attempt_fails(runtime: Runtime, name: str):
    reward, info = await play(runtime, name, solution_action(TASKS[name]))
    assert (reward, info["status"]) == (1.0, "ok"), info
    reward, info = await play(runtime, name)
    assert reward < 1.0 and info["status"] == "wrong_answer", info


def own_image_task(root: Path, dockerfile: str) -> Path:
    """A Terminal-Bench task whose Dockerfile makes its files (no setup.sh): an image of its own."""
    (root / "tests").mkdir(parents=True)
    (root / "Dockerfile").write_text(dockerfile)
    (root / "task.yaml").write_text("instruction: Sort /app/data/numbers.txt numerically into /app/sorted.txt.\n")
    (root / "solution.sh").write_text("sort -n /app/data/numbers.txt > /app/sorted.txt\n")
    (root / "tests" / "test_outputs.py").write_text(
        "def test_sorted():\n    assert open('/app/sorted.txt').read() == '1\\n2\\n10\\n'\n\n\n"
        "def test_input_kept():\n    assert open('/app/data/numbers.txt').read() == '10\\n1\\n2\\n'\n"
    )
    return root


@pytest.mark.docker
async def test_a_task_with_its_own_image_is_built_and_played_on_it(runtime: Runtime, tmp_path: Path):
    # FROM the local project image, so the build needs no registry; like a Terminal-Bench image,
    # it keeps the task's files in a real /app.
    dockerfile = (
        "FROM gem-sandbox/sandbox:latest\n"
        "RUN rm /app && mkdir -p /app/data && printf '10\\n1\\n2\\n' > /app/data/numbers.txt\n"
        "WORKDIR /app\n"
    )
    task_dir = own_image_task(tmp_path / "sort-numbers", dockerfile)
    task = load_task(task_dir)
    assert task.own_image and task_tag(task).startswith("gem-sandbox/task-sort-numbers:")
    env = TerminalEnv(tasks=task_dir, runtime=runtime)
    try:
        obs, _ = await env.areset()
        assert "Sort /app/data/numbers.txt" in obs
        listing, *_ = await env.astep("<bash>cat /app/data/numbers.txt | tr '\\n' ,</bash>")
        assert "10,1,2," in listing  # the image's /app, copied into the work dir
        assert (await env.astep("<finish/>"))[1] == 0.5  # the input is kept, nothing sorted
        await env.areset()
        await env.astep(solution_action(task))
        assert (await env.astep("<finish/>"))[1:3] == (1.0, True)
    finally:
        await env.aclose()


@pytest.mark.docker
def test_a_task_image_that_cannot_be_built_says_why(tmp_path: Path, sandbox_image: str):  # noqa: F811
    # FROM scratch has no shell for RUN, and needs no registry to find that out.
    env = TerminalEnv(tasks=own_image_task(tmp_path / "broken-image", "FROM scratch\nRUN true\n"))
    with pytest.raises(TaskImageUnavailable, match="broken-image"):
        env.reset()
    env.close()


@pytest.mark.docker
async def test_commands_share_one_shell_and_failed_commands_end_the_episode(runtime: Runtime):
    env = TerminalEnv(task="hello-file", runtime=runtime, max_failed_commands=2)
    try:
        await env.areset()
        obs, *_ = await env.astep("<bash>cd /tmp && export MARK=kept</bash>")
        obs, *_ = await env.astep("<bash>cmd: echo $MARK; pwd</bash>")  # GEM's YAML form
        assert "kept\n/tmp" in obs
        await env.astep("<bash>false</bash>")
        obs, reward, terminated, _, info = await env.astep("<bash>ls /nonexistent</bash>")
        assert terminated and info["ended_by"] == "2 commands failed" and reward == 0.0
    finally:
        await env.aclose()


@pytest.mark.docker
async def test_an_action_without_a_command_ends_the_episode_and_scores_the_work(runtime: Runtime):
    env = TerminalEnv(task="hello-file", runtime=runtime)
    try:
        await env.areset()
        await env.astep(solution_action(TASKS["hello-file"]))
        obs, reward, terminated, _, info = await env.astep("I am done, I think.")
        assert (obs, reward, terminated, info["ended_by"]) == (TERMINAL_STATE, 1.0, True, "no <bash> or <finish> action")
    finally:
        await env.aclose()


@pytest.mark.docker
def test_sync_make_plays_a_task_end_to_end(sandbox_image: str):  # noqa: F811
    from gem_sandbox.sync import SyncRuntime

    with SyncRuntime("docker", max_size=2, spec=SPEC) as rt:
        env = make("terminal:hello-file", runtime=rt)
        obs, info = env.reset()
        assert "greeting.txt" in obs and info == {"task": "hello-file"}
        env.step(solution_action(TASKS["hello-file"]))
        assert env.step("<finish/>")[1] == 1.0
        env.close()


# --- a model that goes after the tests --------------------------------------------------------

# Everything a model can do to the tests from inside its episode: look for them and delete
# them, put a fake pytest (module, plugin, conftest, ini, user site) where the tests' Python
# might pick it up, plant result files, and leave processes behind to rewrite them later.
TAMPER = bash(
    r"""
    rm -rf /tests/* /app/tests /logs/* 2>/dev/null
    mkdir -p /logs/verifier /app/logs/verifier
    echo 1 > /logs/verifier/reward.txt; echo 1 > /app/logs/verifier/reward.txt
    echo '{"reward": 1}' > /logs/verifier/reward.json
    echo '{"exit": 0, "tests": {"test_outputs.py::test_known_values[0]": "passed"}}' > /logs/verifier/pytest.json
    printf 'import sys\nprint("1 passed")\nsys.exit(0)\n' > /app/pytest.py
    mkdir -p /app/_pytest && cp /app/pytest.py /app/_pytest/__init__.py
    printf 'import pytest\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_makereport(item, call):\n    call.excinfo = None\n' > /app/conftest.py
    printf '[pytest]\naddopts = -p conftest --co\n' > /app/pytest.ini
    printf 'import os\nos._exit(0)\n' > /app/sitecustomize.py
    mkdir -p /app/.local/lib/python3.11/site-packages && cp /app/sitecustomize.py /app/.local/lib/python3.11/site-packages/usercustomize.py
    printf '#!/bin/sh\nexit 0\n' > /app/python3 && chmod +x /app/python3
    echo 'export PATH=/app:$PATH' > /app/.bashrc; cp /app/.bashrc /app/.profile
    nohup bash -c 'while true; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.01; done' >/dev/null 2>&1 &
    echo tampered
    """
)


@pytest.mark.docker
@pytest.mark.parametrize("name", [HARBOR_TASK, PYTEST_TASK])
async def test_tampering_from_the_episode_changes_no_verdict(runtime: Runtime, name: str):
    reward, info = await play(runtime, name, TAMPER)
    assert reward < 1.0 and info["status"] == "wrong_answer", info
    reward, info = await play(runtime, name, TAMPER, solution_action(TASKS[name]))
    assert (reward, info["status"]) == (1.0, "ok"), info


# Programs the tests run are the model's too. These leave the task unsolved and try to turn
# the verdict around from inside the test run: write the verdict files, kill the runner, read
# its memory, rewrite the tests.
FORGING_FIB = bash(
    r"""
    cat > /app/fib.py <<'PY'
    import glob, json, os, signal, sys
    fake = {"exit": 0, "tests": {"test_outputs.py::test_known_values[%d]" % n: "passed" for n in range(100)}}
    for path in ["/logs/verifier/pytest.json", "/tmp/gem-sandbox-logs/verifier/pytest.json"]:
        try:
            with open(path, "w") as f:
                json.dump(fake, f)
        except OSError:
            pass
    for test in glob.glob("/tests/*.py"):
        try:
            open(test, "w").write("def test_nothing():\n    pass\n")
        except OSError:
            pass
    try:
        open("/proc/%d/mem" % os.getppid(), "r+b")
    except OSError:
        pass
    print(1)
    PY
    """
)
FORGING_STATS = bash(
    r"""
    cat > /app/stats.sh <<'SH'
    #!/bin/bash
    ( for i in $(seq 200); do echo 1 > /logs/verifier/reward.txt; sleep 0.005; done ) >/dev/null 2>&1 &
    echo "0 0 0.00 0.00"
    SH
    chmod +x /app/stats.sh
    """
)
# A prefix that the real verdict completes: "1." before test.sh's "0" reads "1.0"; an open JSON
# object before the runner's report holds it as a value. Written once, then the program exits.
PREFIX_FIB = bash(
    r"""
    cat > /app/fib.py <<'PY'
    import os
    if not os.path.exists("/tmp/prefixed"):
        open("/tmp/prefixed", "w").close()
        with open("/logs/verifier/pytest.json", "w") as f:
            f.write('{"exit": 0, "tests": {"test_outputs.py::test_known_values[0]": "passed"}, "real": ')
    print(0)
    PY
    """
)
PREFIX_STATS = bash(
    r"""
    cat > /app/stats.sh <<'SH'
    #!/bin/bash
    if [ ! -e /tmp/prefixed ]; then : > /tmp/prefixed; printf 1. > /logs/verifier/reward.txt; fi
    echo "0 0 0.00 0.00"
    SH
    chmod +x /app/stats.sh
    """
)
KILLING_FIB = bash(
    r"""
    cat > /app/fib.py <<'PY'
    import json, os, signal
    with open("/logs/verifier/pytest.json", "w") as f:
        json.dump({"exit": 0, "tests": {"test_outputs.py::test_known_values[0]": "passed"}}, f)
    os.kill(os.getppid(), signal.SIGKILL)
    PY
    """
)


@pytest.mark.docker
@pytest.mark.parametrize(
    "name, forgery, why",
    [
        (PYTEST_TASK, FORGING_FIB, "no report from the test runner alone"),
        (PYTEST_TASK, PREFIX_FIB, "no report from the test runner alone"),
        (HARBOR_TASK, FORGING_STATS, "does not hold one reward in one write"),
        (HARBOR_TASK, PREFIX_STATS, "does not hold one reward in one write"),
        (PYTEST_TASK, KILLING_FIB, "ended killed"),
    ],
    ids=["pytest-report-forged", "pytest-report-prefixed", "harbor-reward-raced", "harbor-reward-prefixed", "runner-killed"],
)
async def test_programs_the_tests_run_cannot_forge_the_verdict(runtime: Runtime, name: str, forgery: str, why: str):
    reward, info = await play(runtime, name, forgery)
    assert (reward, info["status"]) == (0.0, "error"), info
    assert why in info["detail"]


@pytest.mark.docker
async def test_a_work_dir_too_big_to_carry_is_the_models_error_not_infra(runtime: Runtime):
    flood = bash("mkdir -p junk && cd junk && seq 1 20001 | xargs touch && ls | wc -l")
    reward, info = await play(runtime, "hello-file", flood)
    assert (reward, info["status"]) == (0.0, "error") and "over 20000 files" in info["detail"], info
