"""``Sandbox.run``: what a run returns, for every way a program can end."""

from __future__ import annotations

import signal
import time

import anyio
import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import UnsafePath, UnsupportedLanguage
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import sandbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio

CAP = RunLimits().max_output_bytes


async def test_hello_lists_languages_and_features(sandbox: Sandbox):
    assert {"python", "bash"} <= set(sandbox.hello["languages"])
    assert {"run", "kernel", "shell", "files", "reset"} <= set(sandbox.hello["features"])
    assert sandbox.hello["version"] == 1
    assert sandbox.alive


async def test_python_prints_and_exits_ok(sandbox: Sandbox):
    result = await sandbox.run("print('hello')")
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        Status.OK,
        0,
        "hello\n",
        "",
    )
    assert result.duration_ms > 0


async def test_nonzero_exit_is_error_with_its_code(sandbox: Sandbox):
    result = await sandbox.run("import sys; print('bye'); sys.exit(3)")
    assert (result.status, result.exit_code, result.stdout) == (Status.ERROR, 3, "bye\n")


async def test_uncaught_exception_prints_a_cpython_traceback(sandbox: Sandbox):
    result = await sandbox.run("x = 1\n1 / 0")
    assert result.status is Status.ERROR and result.exit_code == 1
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 2, in <module>\n'
        "ZeroDivisionError: division by zero\n"
    )


async def test_syntax_error_is_reported_without_agent_frames(sandbox: Sandbox):
    result = await sandbox.run("def f(:\n  pass")
    assert result.status is Status.ERROR
    assert "SyntaxError" in result.stderr and "Traceback" not in result.stderr


async def test_python_runs_as_a_fresh_main_module(sandbox: Sandbox):
    code = (
        "import os, sys\nprint(__name__, sys.argv, sys.path[0] == os.getcwd(), sorted(globals()))"
    )
    dunders = ["__builtins__", "__doc__", "__loader__", "__name__", "__package__", "__spec__"]
    assert (await sandbox.run(code)).stdout == f"__main__ ['-c'] True {dunders + ['os', 'sys']}\n"


async def test_runs_share_no_interpreter_state(sandbox: Sandbox):
    await sandbox.run("import builtins; builtins.leak = 1")
    assert (await sandbox.run("print(hasattr(__builtins__, 'leak'))")).stdout == "False\n"


async def test_atexit_handlers_and_non_daemon_threads_finish(sandbox: Sandbox):
    code = (
        "import atexit, threading, time\n"
        "atexit.register(print, 'atexit')\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n"
        "print('main')"
    )
    assert (await sandbox.run(code)).stdout == "main\nthread\natexit\n"


async def test_asyncio_works_inside_a_run(sandbox: Sandbox):
    code = "import asyncio\nasync def f(): return 42\nprint(asyncio.run(f()))"
    assert (await sandbox.run(code)).stdout == "42\n"


async def test_stdin_is_the_programs_input(sandbox: Sandbox):
    result = await sandbox.run("import sys; print(sys.stdin.read()[::-1])", stdin="abc")
    assert result.stdout == "cba\n"


async def test_without_stdin_input_sees_end_of_file(sandbox: Sandbox):
    result = await sandbox.run("import sys; print(repr(sys.stdin.read()))")
    assert result.stdout == "''\n"


async def test_env_is_minimal_plus_the_request(sandbox: Sandbox):
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    env = (await sandbox.run(code, env={"MY_VAR": "x"})).stdout
    assert '"MY_VAR": "x"' in env and '"LANG": "C.UTF-8"' in env and '"OMP_NUM_THREADS": "1"' in env
    assert "PYTHONUNBUFFERED" not in env
    assert f'"HOME": "{sandbox.hello["workdir"]}"' in env


async def test_cwd_is_a_dir_inside_the_work_dir(sandbox: Sandbox):
    await sandbox.write_files({"sub/x.txt": "x"})
    result = await sandbox.run(
        "import os, sys; print(os.getcwd(), sys.path[0], os.listdir())", cwd="sub"
    )
    sub = sandbox.hello["workdir"] + "/sub"
    assert result.stdout == f"{sub} {sub} ['x.txt']\n"


async def test_cwd_outside_the_work_dir_is_refused(sandbox: Sandbox):
    with pytest.raises(UnsafePath):
        await sandbox.run("print(1)", cwd="../etc")


async def test_bash_runs_a_script(sandbox: Sandbox):
    result = await sandbox.run(
        'echo "$0" | grep -q main.sh && echo ok; echo err >&2; exit 4', "bash"
    )
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        Status.ERROR,
        4,
        "ok\n",
        "err\n",
    )


async def test_bash_pipelines_end_quietly_on_sigpipe(sandbox: Sandbox):
    result = await sandbox.run("yes | head -n 2", "bash")
    assert (result.status, result.stdout, result.stderr) == (Status.OK, "y\ny\n", "")


async def test_cpp_compiles_and_runs(sandbox: Sandbox):
    if "cpp" not in sandbox.hello["languages"]:
        pytest.skip("no g++ in this sandbox")
    code = (
        "#include <iostream>\nint main() { int n; std::cin >> n; std::cout << n * 2 << std::endl; }"
    )
    result = await sandbox.run(code, "cpp", stdin="21", timeout=30)
    assert (result.status, result.stdout) == (Status.OK, "42\n")


async def test_cpp_compile_error_is_error_with_the_compilers_message(sandbox: Sandbox):
    if "cpp" not in sandbox.hello["languages"]:
        pytest.skip("no g++ in this sandbox")
    result = await sandbox.run("int main() { return undefined_name; }", "cpp", timeout=30)
    assert result.status is Status.ERROR and "undefined_name" in result.stderr


async def test_unknown_language_raises(sandbox: Sandbox):
    with pytest.raises(UnsupportedLanguage, match="cobol"):
        await sandbox.run("DISPLAY 'hi'", "cobol")


async def test_timeout_returns_partial_output_within_a_second_of_the_deadline(sandbox: Sandbox):
    started = time.monotonic()
    result = await sandbox.run("import time\nprint('partial')\ntime.sleep(60)", timeout=1.0)
    elapsed = time.monotonic() - started
    assert (result.status, result.stdout) == (Status.TIMEOUT, "partial\n")
    assert 1.0 <= elapsed < 2.0


async def test_timed_out_bash_returns_partial_output(sandbox: Sandbox):
    result = await sandbox.run("echo before; sleep 60; echo after", "bash", timeout=0.5)
    assert (result.status, result.stdout) == (Status.TIMEOUT, "before\n")


async def test_a_memory_error_under_the_cap_is_the_programs_own_error(sandbox: Sandbox):
    # An allocation refused under RLIMIT_AS is handled (or not) by the program: its exit
    # status is the verdict, as for any other exception. Only the kernel's OOM kill is oom.
    result = await sandbox.run("x = bytearray(1 << 30)", limits=RunLimits(run_memory_mb=256))
    assert (result.status, result.exit_code) == (Status.ERROR, 1)
    assert "MemoryError" in result.stderr


async def test_cpp_bad_alloc_under_the_cap_ends_by_its_own_abort(sandbox: Sandbox):
    if "cpp" not in sandbox.hello["languages"]:
        pytest.skip("no g++ in this sandbox")
    code = "#include <vector>\nint main() { std::vector<char> v(1L << 34); return v[0]; }"
    result = await sandbox.run(code, "cpp", timeout=30, limits=RunLimits(run_memory_mb=512))
    assert (result.status, result.signal) == (Status.KILLED, signal.SIGABRT)
    assert "bad_alloc" in result.stderr


@pytest.mark.parametrize(
    "marker", ["MemoryError", "std::bad_alloc", "Cannot allocate memory", "Killed", "oom"]
)
async def test_printed_memory_markers_do_not_make_a_failure_oom(sandbox: Sandbox, marker: str):
    result = await sandbox.run(f"import sys; print({marker!r}, file=sys.stderr); sys.exit(1)")
    assert (result.status, result.exit_code) == (Status.ERROR, 1)


async def test_a_self_sent_sigkill_is_killed_not_oom(sandbox: Sandbox):
    result = await sandbox.run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert (result.status, result.signal) == (Status.KILLED, signal.SIGKILL)


async def test_a_forged_exit_note_does_not_turn_a_failure_into_success(sandbox: Sandbox):
    code = "import os\nos.write(3, b'0 0\\n')\nraise AssertionError('tests failed')"
    result = await sandbox.run(code)
    assert (result.status, result.exit_code) == (Status.ERROR, 1)


async def test_death_by_a_signal_it_sent_itself_is_killed(sandbox: Sandbox):
    result = await sandbox.run("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert (result.status, result.signal, result.exit_code) == (Status.KILLED, 15, -15)


async def test_cpu_limit_is_a_timeout(sandbox: Sandbox):
    result = await sandbox.run("while True: pass", timeout=10, limits=RunLimits(cpu_seconds=1))
    assert result.status is Status.TIMEOUT and result.duration_ms < 5000


async def test_cpu_time_is_reported(sandbox: Sandbox):
    result = await sandbox.run(
        "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    )
    assert result.status is Status.OK and 150 <= result.cpu_ms < 2000


async def test_rlimits_follow_the_run_limits(sandbox: Sandbox):
    code = (
        "import resource as r\n"
        "kinds = (r.RLIMIT_AS, r.RLIMIT_NOFILE, r.RLIMIT_FSIZE, r.RLIMIT_CORE)\n"
        "print([r.getrlimit(kind)[0] for kind in kinds])"
    )
    limits = RunLimits(run_memory_mb=300, nofile=50, file_size_mb=2)
    result = await sandbox.run(code, limits=limits)
    assert result.stdout == f"[{300 << 20}, 50, {2 << 20}, 0]\n"


async def test_writing_past_the_file_size_limit_fails(sandbox: Sandbox):
    code = "open('big', 'wb').write(b'x' * (2 << 20))"
    result = await sandbox.run(code, limits=RunLimits(file_size_mb=1))
    assert result.status is Status.ERROR and "File too large" in result.stderr


async def test_output_past_the_cap_keeps_head_and_tail(sandbox: Sandbox):
    result = await sandbox.run("for i in range(30000): print(i)")
    assert result.status is Status.OUTPUT_LIMIT and result.exit_code == 0 and result.truncated
    assert result.stdout.startswith("0\n1\n2\n") and result.stdout.endswith("29998\n29999\n")
    assert "bytes truncated" in result.stdout
    assert result.stdout_bytes == sum(len(f"{i}\n") for i in range(30000))
    assert len(result.stdout) < CAP + 100


async def test_endless_output_with_newlines_is_stopped(sandbox: Sandbox):
    result = await sandbox.run("while True: print('x' * 100)", timeout=30)
    assert result.status is Status.OUTPUT_LIMIT and result.stdout.startswith("x" * 100)
    assert result.duration_ms < 10_000


async def test_endless_output_without_newlines_is_stopped(sandbox: Sandbox):
    result = await sandbox.run("import sys\nwhile True: sys.stdout.write('y' * 4096)", timeout=30)
    assert result.status is Status.OUTPUT_LIMIT and result.stdout.startswith("y" * 100)
    assert result.stdout.endswith("y" * 100)


async def test_flood_on_stderr_is_stopped_too(sandbox: Sandbox):
    result = await sandbox.run("while true; do echo err >&2; done", "bash", timeout=30)
    assert result.status is Status.OUTPUT_LIMIT and result.stderr.startswith("err\n")


async def test_binary_output_flood_is_output_limit(sandbox: Sandbox):
    result = await sandbox.run("import os; os.write(1, bytes(range(256)) * 1000)")
    assert result.status is Status.OUTPUT_LIMIT and result.stdout_bytes == 256_000
    assert "\ufffd" in result.stdout


async def test_non_utf8_output_is_decoded_with_replacement(sandbox: Sandbox):
    result = await sandbox.run("import os; os.write(1, b'\\xff\\xfe ok\\n'); os.write(2, b'\\x80')")
    assert (result.status, result.stdout, result.stderr) == (
        Status.OK,
        "\ufffd\ufffd ok\n",
        "\ufffd",
    )


async def test_concurrent_runs_all_complete(sandbox: Sandbox):
    results = []

    async def one(i: int) -> None:
        results.append(await sandbox.run(f"import time; time.sleep(0.5); print({i})"))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert sorted(r.stdout for r in results) == [f"{i}\n" for i in range(8)]
    assert all(r.status is Status.OK for r in results)


async def test_a_long_run_does_not_block_ping(sandbox: Sandbox):
    done = anyio.Event()

    async def long_run() -> None:
        await sandbox.run("import time; time.sleep(3)")
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_run)
        await anyio.sleep(0.2)
        await sandbox.ping(timeout=2.0)
        assert not done.is_set()
        tg.cancel_scope.cancel()
