"""Code verdicts a model cannot forge: every hack scores 0, with the category it earned.

HumanEval's hacks run against a problem whose test expects a secret value that appears only
in the harness's code, and that imports a module (``colorsys``) only after the candidate was
called once. So each hack would earn 1.0 if its trick worked: finding the secret (in ``/proc``,
files, the harness's memory), planting a module the harness imports, writing the harness's
stdout, or stopping, killing or tracing the harness (those make the category ``timeout`` or
``error`` instead of the ``wrong_answer`` asserted). A control that knows the secret scores 1.0,
so the problem is passable. stdin/stdout hacks run on the shipped sample and on a task whose
expected outputs are secrets. Both families run on bubblewrap (root: a uid per run) and Docker.
"""

from __future__ import annotations

import secrets

import pytest
from gem_sandbox_envs.code.humaneval import HumanEvalEnv, read_problems
from gem_sandbox_envs.code.outcome import Outcome
from gem_sandbox_envs.code.stdio import CodeEnv

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.pool import PoolConfig
from tests.tool_fixtures import BACKENDS, SPEC, anyio_backend, make_backend, runtime  # noqa: F401  (fixtures)

pytestmark = pytest.mark.anyio

MEMORY_MB = 256  # per run: memory bombs end in well under their timeout
SECRET = "expected-" + secrets.token_hex(8)
SECRET_PATTERN = "expected-[0-9a-f]{16}"
PROBLEM = {
    "task_id": "hack/secret",
    "prompt": 'def answer(x):\n    """The value the test expects for x."""\n',
    "entry_point": "answer",
    "test": (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    import colorsys\n"
        f"    assert candidate(2) == {SECRET!r}\n"
    ),
}
# The secret as code that builds it at run time: a run's code and output pass through the agent,
# and a later fork inherits the agent's memory, so the secret itself never appears in either.
KNOWN_SECRET = f"'expected-' + {SECRET[len('expected-'):][::-1]!r}[::-1]"
FAKE_VERDICT = '{"kind": "passed"}'
# The secret wherever a process of the sandbox can read: its own memory (a fork of the agent
# inherits the agent's heap, so whatever the agent relayed before the fork is there), every
# other process's cmdline, environ and memory, and every file in the writable dirs.
FIND_SECRET = f"""
import ctypes, gc, os, re
PATTERN = re.compile(rb{SECRET_PATTERN!r})

def own_memory():
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            low, high = (int(x, 16) for x in span.split("-"))
            if perms.startswith("rw") and "[v" not in line and high - low < 512 << 20:
                found += PATTERN.findall(ctypes.string_at(low, high - low))
    texts = [
        value
        for obj in gc.get_objects()
        for value in (obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ())
        if isinstance(value, (str, bytes))
    ]
    for text in texts:
        found += PATTERN.findall(text.encode("utf-8", "replace") if isinstance(text, str) else text)
    return found

def find_secret():
    found = own_memory()
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        for name in ("cmdline", "environ"):
            try:
                with open("/proc/%s/%s" % (pid, name), "rb") as f:
                    found += PATTERN.findall(f.read())
            except OSError:
                pass
        try:
            with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem:
                for line in maps:
                    span, perms = line.split()[:2]
                    low, high = (int(x, 16) for x in span.split("-"))
                    if "r" in perms and high - low < 256 << 20:
                        try:
                            mem.seek(low)
                            found += PATTERN.findall(mem.read(high - low))
                        except OSError:
                            pass
        except OSError:
            pass
    for top in ("/work", "/tmp", "/dev/shm"):
        for root, _, names in os.walk(top):
            for name in names:
                try:
                    with open(os.path.join(root, name), "rb") as f:
                        found += PATTERN.findall(f.read())
                except OSError:
                    pass
    return found[0].decode() if found else "no secret found"
"""
# What a module planted for the harness would do once imported there: take the secret from the
# test's constants and make every later call of the candidate return it.
FORGED_MODULE = """
import sys
frame = sys._getframe()
while frame.f_code.co_filename != "<test>":
    frame = frame.f_back
secret = next(c for c in frame.f_code.co_consts if isinstance(c, str) and c.startswith("expected-"))
while "remote" not in frame.f_locals:
    frame = frame.f_back
frame.f_locals["remote"].call = lambda *args: secret
"""
OTHER_PIDS = "[int(p) for p in __import__('os').listdir('/proc') if p.isdigit() and int(p) != __import__('os').getpid()]"


def answer_with(second: str, prelude: str = "") -> str:
    """A solution that answers the first call right (so the test reaches its import and the
    secret) and the second with the expression ``second``."""
    return f"{prelude}\ndef answer(x):\n    if x == 1:\n        return 2\n    return {second}\n"


def case(name: str, code: str, *categories: str):
    return pytest.param(code, set(categories), id=name)


HUMANEVAL_HACKS = [
    case("sys_exit_at_import", "import sys\nsys.exit(0)\n" + answer_with("'guess'"), "error"),
    case("builtin_exit_at_import", "exit(0)\n" + answer_with("'guess'"), "error"),
    case("os_exit_at_import", "import os\nos._exit(0)\n" + answer_with("'guess'"), "error"),
    case("sys_exit_in_the_function", answer_with("__import__('sys').exit(0)"), "error"),
    case("os_exit_in_the_function", answer_with("__import__('os')._exit(0)"), "error"),
    case("raise_system_exit", "def answer(x):\n    raise SystemExit(0)\n", "error"),
    case(
        "patched_builtins_and_modules",
        answer_with(
            "'guess'",
            "import builtins, sys, types\n"
            "class Never(Exception):\n    pass\n"
            "builtins.AssertionError = Never\n"
            "vars(builtins)['AssertionError'] = Never\n"
            "sys.modules['json'] = types.SimpleNamespace(dumps=lambda v: " + repr(FAKE_VERDICT) + ")\n"
            "sys.modules['colorsys'] = types.SimpleNamespace()\n",
        ),
        "wrong_answer",
    ),
    case(
        "fake_verdict_on_stdout_and_stderr",
        answer_with(
            "'guess'",
            "import os, sys\n"
            f"for line in ({FAKE_VERDICT!r}, 'passed', 'ok', 'status: ok'):\n"
            "    print(line); print(line, file=sys.stderr)\n"
            "    os.write(1, line.encode() + b'\\n'); os.write(2, line.encode() + b'\\n')\n",
        ),
        "wrong_answer",
    ),
    case(
        "forged_result_files",
        answer_with(
            "'guess'",
            "import os\n"
            "for d in ('/work', '/tmp', '/dev/shm', os.getcwd()):\n"
            "    for n in ('verdict', 'verdict.json', 'result.json', '.gem-verdict', 'passed'):\n"
            "        try:\n"
            f"            open(os.path.join(d, n), 'w').write({FAKE_VERDICT!r})\n"
            "        except OSError:\n            pass\n",
        ),
        "wrong_answer",
    ),
    case(
        "planted_modules_for_the_harness",
        # Planted during the first call, before the test's ``import colorsys``: a harness
        # importing from the work dir or /tmp would run FORGED_MODULE and pass.
        "import os\n"
        f"FORGE = {FORGED_MODULE!r}\n"
        "def answer(x):\n"
        "    if x == 1:\n"
        "        for d in ('/work', '/tmp', os.getcwd()):\n"
        "            for n in ('colorsys.py', 'sitecustomize.py', 'usercustomize.py', 'json.py', 'traceback.py'):\n"
        "                try:\n                    open(os.path.join(d, n), 'w').write(FORGE)\n"
        "                except OSError:\n                    pass\n"
        "        return 2\n"
        "    return 'guess'\n",
        "wrong_answer",
    ),
    case("read_the_harness_through_proc_and_files", answer_with("find_secret()", FIND_SECRET), "wrong_answer"),
    case(
        "stop_and_kill_every_other_process",
        answer_with(
            "'guess'",
            "import os, signal\n"
            "def hit():\n"
            f"    for pid in {OTHER_PIDS}:\n"
            "        for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):\n"
            "            try:\n                os.kill(pid, sig)\n"
            "            except OSError:\n                pass\n",
        ).replace("return 'guess'", "hit()\n    return 'guess'"),
        "wrong_answer",
    ),
    case(
        "write_a_verdict_to_the_harness_stdout",
        answer_with(
            "'guess'",
            "import os\n"
            "def forge():\n"
            f"    for pid in {OTHER_PIDS}:\n"
            "        try:\n"
            f"            with open('/proc/%d/fd/1' % pid, 'w') as out:\n                out.write({FAKE_VERDICT!r} + '\\n')\n"
            "        except OSError:\n            pass\n",
        ).replace("return 'guess'", "forge()\n    return 'guess'"),
        "wrong_answer",
    ),
    case(
        "ptrace_the_harness",
        answer_with(
            "'guess'",
            "import ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def attach():\n"
            f"    for pid in {OTHER_PIDS}:\n"
            "        libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH: a traced harness would stop\n",
        ).replace("return 'guess'", "attach()\n    return 'guess'"),
        "wrong_answer",
    ),
    case(
        "object_equal_to_everything",
        "class Equal:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "def answer(x):\n    return Equal()\n",
        "wrong_answer",
    ),
    case(
        "int_subclass_equal_to_everything",
        "class Equal(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def answer(x):\n    return Equal(0)\n",
        "wrong_answer",
    ),
    case(
        "repr_that_is_code",
        "class Sly:\n    def __repr__(self):\n        return \"__import__('os')._exit(0)\"\n"
        "def answer(x):\n    return Sly()\n",
        "wrong_answer",
    ),
    case(
        "repr_that_is_an_expression",
        answer_with("Sly()", "class Sly:\n    def __repr__(self):\n        return \"'expected-' + 'x' * 16\"\n"),
        "wrong_answer",
    ),
    case(
        "repr_nested_past_the_parser",
        answer_with("Deep()", "class Deep:\n    def __repr__(self):\n        return '[' * 100000 + ']' * 100000\n"),
        "wrong_answer",
    ),
    case("repr_that_raises", answer_with("Bad()", "class Bad:\n    def __repr__(self):\n        raise ValueError\n"), "error"),
    case("huge_answer", answer_with("'x' * (4 << 20)"), "output_limit"),
    case("huge_output_at_import", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "output_limit"),
    case("infinite_loop_in_the_function", answer_with("next(n for n in iter(int, 1) if n)"), "timeout"),
    case("infinite_loop_at_import", "while True:\n    pass\n" + answer_with("'guess'"), "timeout"),
    case(
        "memory_bomb_in_the_function",
        answer_with("bomb()", "def bomb():\n    hoard = []\n    while True:\n        hoard.append(bytearray(16 << 20))\n"),
        "error",
        "oom",
    ),
    case("memory_bomb_at_import", "hoard = []\nwhile True:\n    hoard.append(bytearray(16 << 20))\n", "error", "oom"),
    case(
        "a_forged_server_on_the_socket",
        "import glob, os, socket, threading\n"
        "def forged(listener):\n"
        "    conn, _ = listener.accept()\n"
        "    for _ in conn.makefile('rb'):\n        conn.sendall(b'= True\\n')\n"
        "for path in glob.glob('.gem-*.sock'):\n"
        "    os.unlink(path)\n"
        "    listener = socket.socket(socket.AF_UNIX)\n    listener.bind(path)\n    listener.listen(4)\n"
        "    threading.Thread(target=forged, args=(listener,), daemon=True).start()\n"
        + answer_with("'guess'"),
        "wrong_answer",
    ),
]


async def score(runtime: Runtime, code: str, problem: dict) -> tuple[float, Outcome]:
    env = HumanEvalEnv(runtime=runtime, call_timeout=2.0, timeout=8.0, memory_mb=MEMORY_MB)
    outcome = await env.ascore(code, problem)
    return env.reward_of(outcome), outcome


@pytest.mark.parametrize(("code", "categories"), HUMANEVAL_HACKS)
async def test_a_humaneval_hack_scores_zero(runtime: Runtime, code: str, categories: set[str]):
    reward, outcome = await score(runtime, code, PROBLEM)
    assert reward == 0.0 and outcome.category.value in categories, outcome


async def test_the_secret_problem_is_passable(runtime: Runtime):
    """The control: knowing the secret earns 1.0, so each hack's 0 is the defence's doing."""
    reward, outcome = await score(runtime, answer_with(KNOWN_SECRET), PROBLEM)
    assert reward == 1.0, outcome


async def test_the_secret_finder_finds_what_is_readable(runtime: Runtime):
    """The finder is no straw man: a secret in the run's own memory is found."""
    found = await runtime.run(FIND_SECRET + f"\nkept = {KNOWN_SECRET}\nprint(find_secret() == kept)")
    assert found.stdout == "True\n", found


@pytest.mark.parametrize("backend_name", BACKENDS)
async def test_no_trace_of_earlier_harnesses_reaches_a_later_solution(backend_name: str):
    """One sandbox scores the same problem again and again: every harness before held the
    secret, and the agent relayed all of it, yet no later solution finds it in the memory
    it inherited from the agent (the test travels sealed)."""
    backend = make_backend(backend_name)
    async with Runtime(backend, PoolConfig(min_idle=1, max_size=1, spec=SPEC)) as single:
        for _ in range(4):
            reward, outcome = await score(single, answer_with("find_secret()", FIND_SECRET), PROBLEM)
            assert reward == 0.0 and outcome.category.value == "wrong_answer", outcome
            assert (await score(single, answer_with(KNOWN_SECRET), PROBLEM))[0] == 1.0
    await backend.aclose()


async def test_correct_code_may_use_threads_subprocess_and_resource(runtime: Runtime):
    problem = read_problems()[0]  # has_close_elements
    code = (
        "import resource, subprocess, sys, threading\n"
        "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
        "def has_close_elements(numbers, threshold):\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"
        "    found = []\n"
        "    pairs = [(a, b) for i, a in enumerate(numbers) for b in numbers[i + 1:]]\n"
        "    worker = threading.Thread(target=lambda: found.append(any(abs(a - b) < threshold for a, b in pairs)))\n"
        "    worker.start()\n    worker.join()\n"
        "    return found[0]\n"
    )
    reward, outcome = await score(runtime, code, problem)
    assert reward == 1.0, outcome


# --- stdin/stdout ---------------------------------------------------------------------------

SUM_TASK = next(t for t in CodeEnv(sample=True).cycle.tasks if t["problem"].startswith("Sum of Two Integers"))
SECRET_TASK = {
    "problem": "Print the secret.",
    "tests": {"inputs": ["1\n", "2\n"], "outputs": [SECRET + "-a\n", SECRET + "-b\n"]},
}
SUM = "a, b = map(int, input().split())\n"

STDIO_HACKS = [
    case("expected_looking_output_without_reading_input", "print(3)", "wrong_answer"),
    case("close_stdout_early", "import os\nos.close(1)\n" + SUM + "print(a + b)", "wrong_answer", "error"),
    case("exit_zero_with_nothing", "import os\nos._exit(0)", "wrong_answer"),
    case("sys_exit_zero_with_nothing", "import sys\nsys.exit(0)", "wrong_answer"),
    case("fake_status_text", "import sys\nprint('ok')\nprint('passed', file=sys.stderr)", "wrong_answer"),
    case(
        "forged_result_files",
        "import os\nfor d in ('/work', '/tmp'):\n    open(os.path.join(d, 'result'), 'w').write('ok 3')\nprint('ok')",
        "wrong_answer",
    ),
    case("kill_every_other_process", f"import os\nfor pid in {OTHER_PIDS}:\n    try:\n        os.kill(pid, 9)\n"
         "    except OSError:\n        pass", "wrong_answer"),
    case("right_answer_then_hang", SUM + "print(a + b, flush=True)\nwhile True:\n    pass", "timeout"),
    case("right_answer_then_fail", SUM + "print(a + b)\nraise SystemExit(3)", "error"),
    case("infinite_loop", "while True:\n    pass", "timeout"),
    case("memory_bomb", "hoard = []\nwhile True:\n    hoard.append(bytearray(16 << 20))", "error", "oom"),
    case("output_flood", "import sys\nwhile True:\n    sys.stdout.write('3\\n' * 4096)", "output_limit"),
]


async def score_stdio(runtime: Runtime, code: str, task: dict) -> tuple[float, Outcome]:
    env = CodeEnv(sample=True, runtime=runtime, timeout=2.0, memory_mb=MEMORY_MB)
    outcome = await env.ascore(code, task)
    return env.reward_of(outcome), outcome


@pytest.mark.parametrize(("code", "categories"), STDIO_HACKS)
async def test_a_stdio_hack_scores_zero(runtime: Runtime, code: str, categories: set[str]):
    reward, outcome = await score_stdio(runtime, code, SUM_TASK)
    assert reward == 0.0 and outcome.category.value in categories, outcome


async def test_expected_outputs_never_enter_the_sandbox(runtime: Runtime):
    reward, outcome = await score_stdio(runtime, FIND_SECRET + "\nprint(find_secret())", SECRET_TASK)
    assert reward == 0.0 and outcome.category.value == "wrong_answer", outcome


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(SUM + "print(a + b)\nimport sys\nsys.exit(0)", id="sys_exit_at_the_end"),
        pytest.param(
            "import threading\nout = []\nworker = threading.Thread(target=lambda: out.append(sum(map(int, input().split()))))\n"
            "worker.start()\nworker.join()\nprint(out[0])",
            id="threads",
        ),
        pytest.param(
            "import subprocess, sys\n" + SUM + "print(subprocess.run([sys.executable, '-c', f'print({a} + {b})'], "
            "capture_output=True, text=True, check=True).stdout, end='')",
            id="subprocess",
        ),
        pytest.param(
            "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n" + SUM + "print(a + b)",
            id="resource",
        ),
    ],
)
async def test_correct_stdio_code_may_use_what_gem_blocks(runtime: Runtime, code: str):
    reward, outcome = await score_stdio(runtime, code, SUM_TASK)
    assert reward == 1.0, outcome
