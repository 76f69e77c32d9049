"""The GEM drop-in: the real ``gem-llm`` package runs its code in gem-sandbox after
``install()``, and its own code comes back after ``uninstall()``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest

from gem_sandbox.integrations import gem as drop_in
from gem_sandbox.sync import SyncRuntime
from tests.tool_fixtures import BACKENDS, make_backend

gem_tool_module = pytest.importorskip(
    "gem.tools.python_code_tool", reason="gem-llm is not installed (pip install 'gem-sandbox[gem]')"
)
gem_sandbox_module = pytest.importorskip("gem.utils.sandbox")
GEMS_RUN_PYTHON = gem_sandbox_module.run_python
PythonCodeTool = gem_tool_module.PythonCodeTool


@pytest.fixture(params=BACKENDS)
def installed(request: pytest.FixtureRequest) -> Iterator[str]:
    make_backend(request.param)  # skips when the backend cannot run here
    drop_in.install(backend=request.param, min_idle=1, max_size=4)
    yield request.param
    drop_in.uninstall()


def test_gems_tool_output_comes_from_our_sandbox(installed: str):
    assert PythonCodeTool().execute_action("<python>print(1+1)</python>")[2] == "Code execution result: 2\n\n"
    _, _, observation, _ = PythonCodeTool().execute_action("<python>import os; print(os.getuid())</python>")
    sandbox_uid = int(observation.removeprefix("Code execution result: "))
    assert sandbox_uid != os.getuid()  # an unprivileged uid of the sandbox, not the host's


def test_gems_timeout_is_now_applied(installed: str):
    started = time.monotonic()
    is_valid, has_error, observation, _ = PythonCodeTool(timeout=1).execute_action("<python>while True: pass</python>")
    assert time.monotonic() - started < 2.5
    assert (is_valid, has_error) == (True, True)
    assert observation == "Code execution result: Execution timed out after 1 seconds.\n"  # GEM's own message


def test_gems_blacklist_is_no_longer_needed(installed: str):
    code = "import subprocess\nprint(subprocess.run(['echo', 'isolated'], capture_output=True, text=True).stdout)"
    assert PythonCodeTool().execute_action(f"<python>{code}</python>")[2] == "Code execution result: isolated\n\n\n"


def sum_env():
    datasets = pytest.importorskip("datasets", reason="GEM's CodeEnv imports datasets")
    from gem.envs.code_env import CodeEnv

    tests = json.dumps({"inputs": ["1 2\n", "20 22\n"], "outputs": ["3\n", "42\n"]})
    problem = {"problem": "Read two integers and print their sum.", "tests": tests}
    env = CodeEnv(dataset_name="taco-tiny", dataset=datasets.Dataset.from_list([problem]), max_workers=2)
    env.reset()
    return env


# Passes only where it cannot be the host's root: proof that scoring ran in the sandbox.
CORRECT = "```python\nimport os\na, b = map(int, input().split())\nprint(a + b if os.getuid() != 0 else 'host')\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"


def test_gems_code_env_scores_solutions_in_our_sandbox(installed: str):
    env = sum_env()
    assert env.step(CORRECT)[1] == 1.0
    assert env.step(WRONG)[1] == 0.0


def test_uninstall_restores_gems_own_run_python():
    code_env = pytest.importorskip("gem.envs.code_env", reason="GEM's CodeEnv imports datasets")
    drop_in.install(backend="local", min_idle=0, max_size=1)
    assert gem_tool_module.run_python is not GEMS_RUN_PYTHON and code_env.run_python is not GEMS_RUN_PYTHON
    drop_in.uninstall()
    assert gem_sandbox_module.run_python is GEMS_RUN_PYTHON
    assert gem_tool_module.run_python is GEMS_RUN_PYTHON and code_env.run_python is GEMS_RUN_PYTHON
    assert not drop_in.installed()


def test_install_runs_gems_code_on_the_callers_runtime_and_leaves_it_open():
    with SyncRuntime("local", min_idle=1, max_size=1) as runtime:
        drop_in.install(runtime)
        try:
            assert PythonCodeTool().execute_action("<python>print(3)</python>")[2] == "Code execution result: 3\n\n"
            assert runtime.statistics().leases == 1
        finally:
            drop_in.uninstall()
        assert runtime.run("print(4)").stdout == "4\n"  # uninstall() closed only what install() opened


def test_install_takes_a_runtime_or_settings_not_both():
    with SyncRuntime("local", min_idle=0, max_size=1) as runtime, pytest.raises(TypeError, match="not both"):
        drop_in.install(runtime, max_size=2)
