"""Differential tests against the real gem-llm 0.1.0: the same env and actions through GEM's
wrapper factory and ours, compared byte for byte.

Each episode resets both stacks and plays the same actions; every ``(obs, info)`` and
``(obs, reward, terminated, truncated, info)`` is compared by ``repr`` (so value types and the
order of info keys count too). GEM's tools run on the host, as GEM runs them (``python`` of
this venv, in a scratch working directory); ours on the ``local`` (bubblewrap) backend, a
handful again on Docker. What is normalised, and only where stated:

* ``info["tool_status"]``, the one info key we add, is checked to be a run status and removed;
* code of 3072 characters or more GEM runs from a temp file, so its tracebacks name that host
  path and quote the source line; ours (``python -c`` semantics in the sandbox, as GEM's
  shorter code) say ``File "<string>"``: GEM's path and quoted lines become ours;
* programs that hit GEM's substring blacklist (``sys.exit``, ``import subprocess``, ...) are
  compared with GEM's blacklist off, after checking that GEM itself blocks them.

Timeouts: GEM's ``timeout`` is never applied (``run_python`` does not pass it on, so every run
waits ``DEFAULT_TIMEOUT`` = 10 s) but its message names it. Programs that never finish are
compared as they are: ours is killed at 5 s, GEM's at 10 s, and both say "after 5 seconds".
A program that finishes between the two is a deliberate difference, asserted as such.
"""

from __future__ import annotations

import http.server
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

gem_factory = pytest.importorskip("gem.wrappers.wrapper_factory", reason="gem-llm is not installed")
gem_core = pytest.importorskip("gem.core")
gem_sandbox_module = pytest.importorskip("gem.utils.sandbox")
from gem.tools.python_code_tool import PythonCodeTool as GemPythonCodeTool  # noqa: E402
from gem.utils.constants import BASE_IMPORTS  # noqa: E402

from gem_sandbox.core import Env  # noqa: E402
from gem_sandbox.integrations import gem as drop_in  # noqa: E402
from gem_sandbox.sandbox.result import Status  # noqa: E402
from gem_sandbox.sync import SyncRuntime  # noqa: E402
from gem_sandbox.tools.python_code_tool import STANDARD_IMPORTS, PythonCodeTool  # noqa: E402
from gem_sandbox.wrappers.wrapper_factory import get_wrapper_fns  # noqa: E402
from tests.tool_fixtures import make_backend  # noqa: E402

PYTHON_TOOLS = ["python_tool", "python_tool_no_int_reward", "python_tool_no_int_reward_last_line_error"]
QUESTION = "What is 2 + 2?"
TERMINAL_STATE = "<｜TERMINAL_STATE｜>"
FINAL = "So the answer is \\boxed{4}."
STATUSES = {status.value for status in Status}


# -- one env, written once for each stack -----------------------------------------------------


def _score(action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    answers = re.findall(r"\\boxed\{([^{}]*)\}", action)
    correct = bool(answers) and answers[-1].strip() == "4"
    return TERMINAL_STATE, 1.0 if correct else 0.0, True, True, {"correct": correct}


class GemBoxedEnv(gem_core.Env):
    def reset(self, seed=None):
        super().reset(seed)
        return QUESTION, {}

    def step(self, action):
        return _score(action)


class BoxedEnv(Env):
    blocking = False

    def reset(self, seed: int | None = None, **kwargs: Any):
        self.seed_rng(seed)
        return QUESTION, {}

    def step(self, action: Any):
        return _score(action)


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def gems_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """GEM runs ``python`` from PATH in temp dirs under the working directory: this venv's
    python (it has GEM's numpy and pandas), in a scratch directory."""
    old_cwd, old_path = os.getcwd(), os.environ.get("PATH", "")
    os.chdir(tmp_path_factory.mktemp("gem-cwd"))
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + old_path
    yield
    os.chdir(old_cwd)
    os.environ["PATH"] = old_path


def _runtime(backend: str, **options: Any) -> Iterator[SyncRuntime]:
    make_backend(backend)  # skips when the backend cannot run here
    with SyncRuntime(backend, min_idle=1, max_size=4, **options) as runtime:
        runtime.wait_ready()
        yield runtime


@pytest.fixture(scope="module")
def local() -> Iterator[SyncRuntime]:
    yield from _runtime("local")


@pytest.fixture(scope="module")
def docker() -> Iterator[SyncRuntime]:
    yield from _runtime("docker")


@pytest.fixture
def no_blacklist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gem_sandbox_module, "check_forbidden_imports", lambda code: False)


# -- playing an episode on both stacks ---------------------------------------------------------

Transcript = list[tuple[Any, ...]]


def _play(env: Any, actions: Sequence[str]) -> Transcript:
    transcript: Transcript = [tuple(env.reset())]
    for action in actions:
        transcript.append(tuple(env.step(action)))
        if transcript[-1][2] or transcript[-1][3]:
            break
    return transcript


def gem_episode(name: str, actions: Sequence[str]) -> Transcript:
    return _play(gem_factory.WRAPPER_FACTORY[name](GemBoxedEnv()), actions)


def our_episode(runtime: SyncRuntime, name: str, actions: Sequence[str]) -> Transcript:
    env = get_wrapper_fns(name, runtime=runtime)[0](BoxedEnv())
    try:
        transcript = _play(env, actions)
    finally:
        env.close()
    for record in transcript[1:]:
        info = record[-1]
        if "tool_status" in info:  # the one key we add; GEM has no run status
            assert info.pop("tool_status") in STATUSES and info["use_tool"] is True
    return transcript


def both(
    runtime: SyncRuntime, name: str, actions: Sequence[str], gem_text: Callable[[str], str] = lambda text: text
) -> tuple[list[str], list[str]]:
    """Both transcripts, as reprs (GEM's observations through ``gem_text``), played at once."""
    with ThreadPoolExecutor(1) as pool:
        theirs = pool.submit(gem_episode, name, actions)
        ours = our_episode(runtime, name, actions)
        gems = theirs.result()
    gems = [(gem_text(record[0]), *record[1:]) if isinstance(record[0], str) else record for record in gems]
    return [repr(record) for record in ours], [repr(record) for record in gems]


def assert_same(runtime: SyncRuntime, name: str, actions: Sequence[str], **kwargs: Any) -> list[str]:
    ours, gems = both(runtime, name, actions, **kwargs)
    assert ours == gems
    return ours


# -- the cases ---------------------------------------------------------------------------------

PROGRAMS = [
    # plain output, stderr, their order and whitespace
    "print(1 + 1)",
    "print('out')\nimport sys\nprint('warn', file=sys.stderr)",
    "import sys\nprint('err only', file=sys.stderr)",
    "import sys\nsys.stderr.write('  spaced error  \\n\\n')",
    "pass",
    "x = 5",
    "print()",
    "print('\\n  indented after blank lines')",
    "print('\\t tabbed')",
    "print('   leading spaces')",
    "import sys\nsys.stdout.write('no newline')",
    "print('a\\r\\nb')",
    "print('nul \\x00 byte')",
    "print('é ü 中文 🙂')",
    "print(__name__)",
    "import sys\nprint(sys.argv)",
    "print(repr(...))",
    "print(2 ** 100)",
    "print(sorted({3, 1, 2}))",
    "import json\nprint(json.dumps({'a': [1, 2]}))",
    "import time\ntime.sleep(0.2)\nprint('slept')",
    "try:\n    1/0\nexcept ZeroDivisionError as e:\n    print('caught', e)",
    "import traceback\ntry:\n    1/0\nexcept Exception:\n    traceback.print_exc()",
    "import warnings\nwarnings.warn('careful')\nprint('after')",
    # tracebacks
    "print('before')\nraise ValueError('bad value')",
    "x = 1/0",
    "x = [1, 2, 3]\nprint(x[5])",
    "class A: pass\nprint(A().missing)",
    "print(int('abc'))",
    "assert 1 == 2, 'nope'",
    "import nonexistent_module_xyz",
    "def f(:\n    pass",
    'print("unterminated',
    "if True:\nprint(1)",
    "raise KeyboardInterrupt",
    "import signal\nprint('going', flush=True)\nsignal.raise_signal(signal.SIGTERM)",
    "raise SystemExit(2)",
    "print('partial')\nraise SystemExit(0)",
    "exit(1)",
    "quit()",
    # GEM's re-run with its standard imports
    "print(sqrt(16))",
    "print(Counter('hello').most_common(1))",
    "print(factorial(5), gcd(12, 18), comb(5, 2), isqrt(17))",
    "print(List, Optional)",
    "print(deque([1, 2]), defaultdict(int)['k'])",
    "print('first run output')\nprint(sqrt(2))",
    "print(undefined_name)",
    "print('first run output')\nprint(undefined_name)",
    "print(__file__)",
    "raise NameError('custom is not defined')",
    "raise Exception('this is not defined either')",
    "import math\nprint(math.pi)",
    # long output, within the runtime's max_output_bytes
    "print('x' * 60000)",
    "for i in range(3000):\n    print(i)",
    "import sys\nprint('y' * 30000, file=sys.stderr)\nraise SystemExit('z' * 10)",
]


@pytest.mark.parametrize("code", PROGRAMS)
def test_a_program_answers_as_in_gem(local: SyncRuntime, code: str):
    assert_same(local, "python_tool", [f"<python>{code}</python>", FINAL])


LAST_LINE_PROGRAMS = [
    "print('before')\nraise ValueError('bad value')",
    "print(undefined_name)",
    "import sys\nprint('warn\\nmore', file=sys.stderr)",
    "print('only stdout')",
]


@pytest.mark.parametrize("name", PYTHON_TOOLS[1:])
@pytest.mark.parametrize("code", LAST_LINE_PROGRAMS)
def test_every_python_factory_name_answers_as_in_gem(local: SyncRuntime, name: str, code: str):
    assert_same(local, name, [f"```python\n{code}\n```", FINAL])


BLACKLISTED = [
    "import sys\nsys.exit(0)",
    "import sys\nsys.exit(3)",
    "import sys\nsys.exit('bye')",
    "import sys\nprint('done')\nsys.exit(1)",
    "import subprocess\nprint(subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout)",
    "import os\nos.system('echo from the shell')",
]


@pytest.mark.parametrize("code", BLACKLISTED)
def test_programs_gems_blacklist_blocks_answer_as_gem_without_it(local: SyncRuntime, code: str, monkeypatch):
    blocked = GemPythonCodeTool(timeout=5).execute_action(f"<python>{code}</python>")
    assert blocked[:3] == (
        True,
        True,
        "Code execution result: Execution blocked: Code contains potentially dangerous operations or imports.\n",
    )
    monkeypatch.setattr(gem_sandbox_module, "check_forbidden_imports", lambda code: False)
    assert_same(local, "python_tool", [f"<python>{code}</python>", FINAL])


ACTIONS = [
    # GEM's answer to a bare ``...``, and what it extracts
    "<python>...</python>",
    "<python> ...\n</python>",
    "```python\n...\n```",
    "<python>....</python>",
    # empty blocks
    "<python></python>",
    "<python>\n\n</python>",
    "```python\n```",
    "```python```",
    # several blocks: the one that ends first
    "<python>print(1)</python> and <python>print(2)</python>",
    "```python\nprint(2)\n``` then <python>print(1)</python>",
    "<python>print(1)</python> then ```python\nprint(2)\n```",
    "<python>```python\nprint(3)\n```</python>",
    "```\npython\nprint(4)```",
    "```python3\nprint(5)\n```",
    "think first\n<python>\nprint('x')\n</python>\nand more text after",
    # no complete block: the env scores the text
    "```py\nprint(6)\n```",
    "<python>print(1)",
    "no code here",
    # \boxed{} answers next to tool text
    "The answer is \\boxed{4}. <python>print(2 + 2)</python>",
    "<python>print(2 + 2)</python> so \\boxed{4}",
    "\\boxed{4}",
    "\\boxed{5}",
    # JSON tool calls are not GEM's: the env scores the text
    '\\boxed{4} <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>',
    '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>',
    "<tool_call>{not json}</tool_call> \\boxed{4}",
    "<search>capital of France</search> \\boxed{4}",
]


@pytest.mark.parametrize("action", ACTIONS)
def test_an_action_answers_as_in_gem(local: SyncRuntime, action: str):
    assert_same(local, "python_tool", [action, FINAL])


@pytest.mark.parametrize("name", PYTHON_TOOLS)
def test_an_episode_past_max_tool_uses_answers_as_in_gem(local: SyncRuntime, name: str):
    actions = [
        "<python>print(1)</python>",
        "<python>1/0</python>",
        "<python>print(sqrt(9))</python>",
        "<python>...</python>",
        "<python>print('fifth')</python>",  # the fifth use: GEM's "maximum number" message
        "<python>print('past the limit')</python> \\boxed{4}",  # goes to the env
    ]
    transcript = assert_same(local, name, actions)
    assert len(transcript) == 7 and "Reached the maximum number of tool use" in transcript[5]


def test_long_code_answers_as_in_gem_but_for_gems_temp_file_path(local: SyncRuntime):
    """Code of 3072 characters or more: GEM's traceback names its temp file on the host and
    quotes the source lines; ours is ``File "<string>"``, as for GEM's shorter code."""

    def as_ours(text: str) -> str:
        return re.sub(r'File "/[^"]*\.py", (line \d+, in [^\n]*)\n(?:    [^\n]*\n)*', r'File "<string>", \1\n', text)

    padding = "x = 1\n" * 600
    for code in [padding + "print('long ok')", padding + "print(1/0)", padding + "print(sqrt(4))", padding + "y = z"]:
        ours, gems = both(local, "python_tool", [f"<python>{code}</python>", FINAL], gem_text=as_ours)
        assert ours == gems


TIMEOUT_EPISODES = [
    ("python_tool", "import time\ntime.sleep(60)"),
    ("python_tool", "print('working', flush=True)\nimport time\ntime.sleep(60)"),
    ("python_tool_no_int_reward", "try:\n    sqrt\nexcept NameError:\n    raise\nimport time\ntime.sleep(60)"),
    ("python_tool_no_int_reward_last_line_error", "import sys, time\nprint('e', file=sys.stderr)\ntime.sleep(60)"),
]


def test_programs_that_never_finish_time_out_as_in_gem(local: SyncRuntime):
    """GEM waits 10 s, we wait the tool's 5 s; both say GEM's "after 5 seconds". The episodes
    run at once (they sleep), the third through GEM's re-run first."""
    actions = [[f"<python>{code}</python>", FINAL] for _, code in TIMEOUT_EPISODES]
    with ThreadPoolExecutor(2 * len(actions)) as pool:
        gems = [pool.submit(gem_episode, name, acts) for (name, _), acts in zip(TIMEOUT_EPISODES, actions)]
        ours = [pool.submit(our_episode, local, name, acts) for (name, _), acts in zip(TIMEOUT_EPISODES, actions)]
        for mine, theirs in zip(ours, gems):
            transcript = mine.result()
            assert [repr(r) for r in transcript] == [repr(r) for r in theirs.result()]
            assert transcript[1][0] == "Code execution result: Execution timed out after 5 seconds.\n"


# -- deliberate differences, asserted -----------------------------------------------------------


def test_gems_timeout_is_not_applied_ours_is(local: SyncRuntime):
    action = "<python>import time\ntime.sleep(2)\nprint('late')</python>"
    assert GemPythonCodeTool(timeout=1).execute_action(action)[:3] == (True, False, "Code execution result: late\n\n")
    ours = PythonCodeTool(timeout=1, runtime=local).execute_action(action)
    assert ours[:3] == (True, True, "Code execution result: Execution timed out after 1 seconds.\n")


def test_output_that_is_not_utf8_breaks_gem_and_is_decoded_leniently_here(local: SyncRuntime):
    action = "<python>import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end\\n')</python>"
    with pytest.raises(UnicodeDecodeError):
        GemPythonCodeTool().execute_action(action)
    assert PythonCodeTool(runtime=local).execute_action(action)[:3] == (
        True,
        False,
        "Code execution result: ok \ufffd\ufffd end\n\n",
    )


def test_output_past_the_runtimes_max_output_bytes_is_cut_where_gem_keeps_it(local: SyncRuntime):
    action = "<python>print('x' * 100000 + 'END')</python>"
    gems = GemPythonCodeTool().execute_action(action)
    ours = PythonCodeTool(runtime=local).execute_action(action)
    assert len(gems[2]) == len("Code execution result: ") + 100005 and gems[1] is False
    assert "bytes truncated ...]" in ours[2] and ours[2].endswith("END\n\n") and ours[1] is False
    with SyncRuntime("local", min_idle=0, max_size=1, max_output_bytes=1 << 20) as roomy:
        assert PythonCodeTool(runtime=roomy).execute_action(action) == gems


def test_standard_imports_are_gems_line_for_line():
    gems, ours = BASE_IMPORTS.splitlines(), STANDARD_IMPORTS.splitlines()
    assert len(gems) == len(ours) == 35
    differing = [(g, o) for g, o in zip(gems, ours) if g != o]
    assert [g for g, _ in differing] == ["import numpy as np", "import pandas as pd"]
    assert all(o.endswith(": " + g) for g, o in differing)  # the same import, skipped where absent


# -- Docker: a handful again -------------------------------------------------------------------

DOCKER_ACTIONS = [
    "<python>print(sqrt(16))</python>",
    "<python>print(np.arange(3).sum())</python>",  # the image has numpy (not pandas)
    "<python>print(undefined_name)</python>",
    "<python>...</python>",
    "<python>print('é')\nraise ValueError('bad')</python>",
    "\\boxed{4} <tool_call>{}</tool_call>",
]


@pytest.mark.docker
@pytest.mark.parametrize("action", DOCKER_ACTIONS)
def test_docker_answers_as_in_gem(docker: SyncRuntime, action: str):
    assert_same(docker, "python_tool", [action, FINAL])


@pytest.mark.docker
def test_docker_times_out_as_in_gem(docker: SyncRuntime):
    assert_same(docker, "python_tool_no_int_reward", ["<python>import time\ntime.sleep(60)</python>", FINAL])


# -- search_tool, against one fake server speaking both protocols --------------------------------


class _SearchHandler(http.server.BaseHTTPRequestHandler):
    """GEM 0.1.0 posts msgpack ``{"query": q, ...}`` and reads ``{"result": [docs]}``; ours
    posts Search-R1's JSON ``{"queries": [q], ...}`` and reads ``{"result": [[docs]]}``."""

    def do_POST(self) -> None:  # noqa: N802
        import json

        import msgspec

        body = self.rfile.read(int(self.headers["Content-Length"]))
        is_json = "json" in self.headers.get("Content-Type", "")
        request = json.loads(body) if is_json else msgspec.msgpack.decode(body)
        query = request["queries"][0] if is_json else request["query"]
        docs = [
            {"document": {"contents": f"Title {i} on {query}\nLine one.\nLine two."}, "score": 1.0 / i}
            for i in range(1, request["topk"] + 1)
        ]
        payload = json.dumps({"result": [docs]}).encode() if is_json else msgspec.msgpack.encode({"result": docs})
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def search_url() -> Iterator[str]:
    pytest.importorskip("msgspec")
    pytest.importorskip("aiohttp")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SearchHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    server.shutdown()


@pytest.mark.parametrize("name", ["search_tool", "search_tool_no_int_reward"])
def test_search_answers_as_in_gem(local: SyncRuntime, search_url: str, name: str, monkeypatch):
    for tool in gem_factory.WRAPPER_FACTORY[name].keywords["tools"]:
        monkeypatch.setattr(tool, "search_url", search_url)
        monkeypatch.setattr(tool, "_search_url_resolved", True)
    monkeypatch.setenv("SEARCH_URL", search_url)
    actions = [
        "<think>I need facts</think><search> capital of France </search>",
        "<search>second\nquery</search> \\boxed{4}",
        "<answer>Paris</answer> \\boxed{4}",
    ]
    assert_same(local, name, actions)


# -- CodeEnv scoring through integrations.gem ------------------------------------------------------


def code_env(inputs: list[str], outputs: list[str]):
    datasets = pytest.importorskip("datasets", reason="GEM's CodeEnv imports datasets")
    from gem.envs.code_env import CodeEnv

    problem = {"problem": "Solve it.", "tests": {"inputs": inputs, "outputs": outputs}}
    env = CodeEnv(dataset_name="taco-parity", dataset=datasets.Dataset.from_list([problem]), max_workers=2)
    env.reset()
    return env


SUM = (["1 2\n", "20 22\n"], ["3\n", "42\n"])
MIB = 1 << 20
SCORING = [
    ("correct", SUM, "a, b = map(int, input().split())\nprint(a + b)", 1.0),
    ("wrong", SUM, "a, b = map(int, input().split())\nprint(a - b)", 0.0),
    ("standard imports", (["16\n"], ["4\n"]), "print(isqrt(int(input())))", 1.0),
    ("standard imports, two tests", SUM, "a, b = map(int, input().split())\nprint(reduce(sub, [a, -b]))", 1.0),
    ("ellipsis", SUM, "...", 0.0),
    ("16 MiB of output", (["go\n"], ["x" * (16 * MIB)]), "input()\nprint('x' * (16 << 20))", 1.0),
    ("2 GiB of memory", (["2\n"], ["2048\n"]), "n = int(input())\nb = b'x' * (n << 30)\nprint(len(b) >> 20)", 1.0),
]


@pytest.fixture
def installed_local() -> Iterator[None]:
    make_backend("local")
    drop_in.install(backend="local", min_idle=0, max_size=2)
    yield
    drop_in.uninstall()


@pytest.mark.parametrize(("label", "tests", "solution", "reward"), SCORING, ids=[case[0] for case in SCORING])
def test_code_env_scores_as_gem_does(installed_local: None, label: str, tests, solution: str, reward: float):
    action = f"```python\n{solution}\n```"
    ours = code_env(*tests).step(action)[1]
    drop_in.uninstall()  # GEM's own run_python, on the host
    gems = code_env(*tests).step(action)[1]
    assert (ours, gems) == (reward, reward)


@pytest.mark.docker
@pytest.mark.parametrize("label", ["standard imports", "16 MiB of output", "2 GiB of memory"])
def test_docker_code_env_scores_as_gem_does(label: str):
    make_backend("docker")
    _, tests, solution, reward = next(case for case in SCORING if case[0] == label)
    drop_in.install(backend="docker", min_idle=0, max_size=2)
    try:
        assert code_env(*tests).step(f"```python\n{solution}\n```")[1] == reward
    finally:
        drop_in.uninstall()


def test_scoring_limits_are_settable(installed_local: None):
    drop_in.install(backend="local", min_idle=0, max_size=1, max_output_bytes=1 * MIB)
    _, tests, solution, _ = next(case for case in SCORING if case[0] == "16 MiB of output")
    assert code_env(*tests).step(f"```python\n{solution}\n```")[1] == 0.0  # cut at 1 MiB: wrong
    with pytest.raises(ValueError, match="64 MiB"):
        drop_in.install(backend="local", max_output_bytes=40 * MIB)
