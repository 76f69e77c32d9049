"""SandboxFusion's own client package, unmodified, against the service's ``/run_code`` and
``/run_jupyter`` over loopback HTTP (Docker backend): a client moves by changing its endpoint,
with the token in the path since the package sends no headers."""

from __future__ import annotations

import functools

import anyio.to_thread
import pytest

from gem_sandbox.service.state import Service
from tests.service_fixtures import ALPHA, docker_client, sandbox_image, service  # noqa: F401 - fixtures

sandbox_fusion = pytest.importorskip("sandbox_fusion", reason="needs the sandbox-fusion package: pip install -e '.[test]'")
pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def run_code(service: Service, **request: object):  # noqa: F811
    call = functools.partial(
        sandbox_fusion.run_code,
        sandbox_fusion.RunCodeRequest(**request),
        endpoint=f"{service.url}/t/{ALPHA.secret}",
        max_attempts=1,
    )
    return await anyio.to_thread.run_sync(call)


async def test_python_round_trips(service: Service) -> None:  # noqa: F811
    response = await run_code(service, code="print(6 * 7)", language="python")
    assert response.status == sandbox_fusion.RunStatus.Success
    assert (response.run_result.return_code, response.run_result.stdout) == (0, "42\n")
    assert response.compile_result is None


async def test_bash_reads_stdin(service: Service) -> None:  # noqa: F811
    response = await run_code(service, code="read a b; echo $((a + b))", language="bash", stdin="2 3\n")
    assert (response.status, response.run_result.stdout) == (sandbox_fusion.RunStatus.Success, "5\n")


async def test_cpp_compiles_then_runs_with_stdin(service: Service) -> None:  # noqa: F811
    code = "#include <iostream>\nint main() { int n; std::cin >> n; std::cout << n * n << std::endl; }\n"
    response = await run_code(service, code=code, language="cpp", stdin="9\n")
    assert response.status == sandbox_fusion.RunStatus.Success
    assert response.compile_result.return_code == 0
    assert response.run_result.stdout == "81\n"


async def test_a_cpp_compile_error_fails_without_a_run(service: Service) -> None:  # noqa: F811
    response = await run_code(service, code="int main() { return oops; }", language="cpp")
    assert response.status == sandbox_fusion.RunStatus.Failed
    assert response.compile_result.return_code != 0 and response.run_result is None
    mapping = sandbox_fusion.SummaryMapping(CompileFailed="compile failed")
    assert sandbox_fusion.summary_run_code_result(response, mapping) == "compile failed"


async def test_a_run_past_its_timeout_is_time_limit_exceeded(service: Service) -> None:  # noqa: F811
    response = await run_code(service, code="while True: pass", language="python", run_timeout=1)
    assert response.status == sandbox_fusion.RunStatus.Failed
    assert response.run_result.status == sandbox_fusion.CommandRunStatus.TimeLimitExceeded


async def test_a_failing_program_is_failed_with_its_return_code(service: Service) -> None:  # noqa: F811
    response = await run_code(service, code="import sys; print('Success'); sys.exit(4)", language="python")
    assert response.status == sandbox_fusion.RunStatus.Failed
    assert response.run_result.return_code == 4


async def test_jupyter_cells_keep_state(service: Service) -> None:  # noqa: F811
    request = sandbox_fusion.RunJupyterRequest(cells=["a = 123", "a += 1", "print(a)", "1 / 0", "print(a * 2)"])
    call = functools.partial(sandbox_fusion.run_jupyter, request, endpoint=f"{service.url}/t/{ALPHA.secret}", max_attempts=1)
    response = await anyio.to_thread.run_sync(call)
    assert response.status == sandbox_fusion.RunStatus.Success
    assert [cell.stdout for cell in response.cells] == ["", "", "124\n", "", "248\n"]
    assert response.cells[3].error and not response.cells[2].error


async def test_jupyter_display_data_reaches_the_client(service: Service) -> None:  # noqa: F811
    cells = ["word = 'sandbox'", "word.upper()", "import sys\nsys.stderr.write(word)", "word;"]
    request = sandbox_fusion.RunJupyterRequest(cells=cells)
    call = functools.partial(sandbox_fusion.run_jupyter, request, endpoint=f"{service.url}/t/{ALPHA.secret}", max_attempts=1)
    response = await anyio.to_thread.run_sync(call)
    assert [cell.display for cell in response.cells] == [[], [{"text/plain": "'SANDBOX'"}], [{"text/plain": "7"}], []]
    assert [cell.stdout for cell in response.cells] == ["", "", "", ""]
    assert response.cells[2].stderr == "sandbox"


async def test_a_file_written_to_an_absolute_work_dir_path_is_fetched_by_that_name(service: Service) -> None:  # noqa: F811
    code = "open('/work/result.txt', 'w').write(input()[::-1])"
    response = await run_code(service, code=code, language="python", stdin="abc\n", fetch_files=["/work/result.txt", "/mnt/b"])
    assert response.status == sandbox_fusion.RunStatus.Success
    assert response.files == {"/work/result.txt": "Y2Jh"}  # base64 of "cba"
