"""SandboxFusion's ``run_code`` and ``run_jupyter`` semantics (gem_sandbox.service.fusion),
called directly on a real runtime: bubblewrap, and Docker for the C++ cases."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
from pydantic import ValidationError

from gem_sandbox.runtime import Runtime
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.fusion import RunCodeRequest, RunJupyterRequest, run_code, run_jupyter
from tests.docker_fixtures import docker_client, sandbox_image  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

MAX_TIMEOUT = 30.0
SQUARE = "#include <iostream>\nint main() { int n; std::cin >> n; std::cout << n * n << std::endl; }\n"


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    async with Runtime("local", max_size=2) as opened:
        yield opened


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
async def cpp_runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """A runtime whose sandboxes have g++ (bubblewrap uses the host's /usr, which may not)."""
    options = {"image": request.getfixturevalue("sandbox_image")} if request.param == "docker" else {}
    async with Runtime(request.param, max_size=2, **options) as opened:
        async with opened.lease() as sandbox:
            languages = sandbox.hello.get("languages", [])
        if "cpp" not in languages:
            pytest.skip(f"no g++ in the {request.param} sandboxes (they have {', '.join(languages)})")
        yield opened


async def code(runtime: Runtime, **request: object):
    return await run_code(runtime, RunCodeRequest.model_validate(request), max_timeout=MAX_TIMEOUT)


async def notebook(runtime: Runtime, *cells: str, **request: object):
    body = RunJupyterRequest.model_validate(dict(request, cells=list(cells)))
    return await run_jupyter(runtime, body, max_timeout=MAX_TIMEOUT)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# -- run_code -------------------------------------------------------------------------------------


async def test_python_output_is_success(runtime: Runtime) -> None:
    response = await code(runtime, code="print(6 * 7)", language="python")
    assert response.status == "Success" and response.message == ""
    assert (response.run_result.status, response.run_result.return_code) == ("Finished", 0)
    assert response.run_result.stdout == "42\n" and response.compile_result is None


async def test_a_non_zero_exit_is_failed_with_its_return_code(runtime: Runtime) -> None:
    response = await code(runtime, code="import sys; sys.exit(4)", language="python")
    assert response.status == "Failed"
    assert (response.run_result.status, response.run_result.return_code) == ("Finished", 4)


async def test_a_signal_death_reports_minus_the_signal(runtime: Runtime) -> None:
    response = await code(runtime, code="import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", language="python")
    assert response.status == "Failed" and response.run_result.return_code == -11


async def test_a_run_past_its_timeout_is_time_limit_exceeded(runtime: Runtime) -> None:
    response = await code(runtime, code="while True: pass", language="python", run_timeout=1)
    assert response.status == "Failed"
    assert (response.run_result.status, response.run_result.return_code) == ("TimeLimitExceeded", None)


async def test_bash_reads_stdin(runtime: Runtime) -> None:
    response = await code(runtime, code="read a b; echo $((a + b))", language="bash", stdin="2 3\n")
    assert (response.status, response.run_result.stdout) == ("Success", "5\n")


async def test_files_go_in_and_fetched_files_come_back_as_base64(runtime: Runtime) -> None:
    program = "open('out.txt', 'w').write(open('data/in.txt').read() * 2)"
    response = await code(
        runtime, code=program, language="python", files={"data/in.txt": b64(b"ab")}, fetch_files=["out.txt"]
    )
    assert response.status == "Success"
    assert response.files == {"out.txt": b64(b"abab")}
    assert response.executor_pod_name


async def test_a_missing_fetch_file_is_left_out(runtime: Runtime) -> None:
    program = "open('made.txt', 'w').write('x')"
    response = await code(runtime, code=program, language="python", fetch_files=["absent.txt", "made.txt"])
    assert response.status == "Success" and response.files == {"made.txt": b64(b"x")}


async def test_an_absolute_path_in_the_work_dir_is_that_file_answered_by_its_given_name(runtime: Runtime) -> None:
    program = "import os; open('/work/b.txt', 'w').write(open('data/in.txt').read() + os.getcwd())"
    response = await code(
        runtime,
        code=program,
        language="python",
        files={"/work/data/in.txt": b64(b"cwd=")},
        fetch_files=["/work/b.txt", "./b.txt"],
    )
    assert response.status == "Success", response.run_result.stderr
    assert response.files == {"/work/b.txt": b64(b"cwd=/work"), "./b.txt": b64(b"cwd=/work")}


async def test_an_absolute_fetch_outside_the_work_dir_is_left_out(runtime: Runtime) -> None:
    response = await code(runtime, code="open('a.txt', 'w').write('a')", language="python", fetch_files=["/etc/passwd", "a.txt"])
    assert response.status == "Success" and response.files == {"a.txt": b64(b"a")}


def test_a_file_for_outside_the_work_dir_is_refused_saying_where_files_go() -> None:
    with pytest.raises(ValidationError) as raised:  # the route answers it as a 400
        RunCodeRequest.model_validate({"code": "pass", "language": "python", "files": {"/mnt/b": b64(b"x")}})
    assert "'/mnt/b'" in str(raised.value) and "outside the work dir /work" in str(raised.value)


@pytest.mark.parametrize(("language", "why"), [("cuda", "GPU"), ("cobol", "not a language")])
async def test_a_language_the_agent_cannot_serve_is_a_400_saying_why(runtime: Runtime, language: str, why: str) -> None:
    with pytest.raises(Problem) as raised:
        await code(runtime, code="x", language=language)
    assert (raised.value.status, raised.value.kind) == (400, "unsupported_language")
    assert repr(language) in raised.value.message and why in raised.value.message


async def test_a_language_the_sandbox_lacks_a_program_for_is_a_400_naming_it(runtime: Runtime) -> None:
    async with runtime.lease() as sandbox:
        served = set(sandbox.hello["languages"])
    if "lua" in served:
        pytest.skip("these sandboxes serve lua: nothing is missing to name")
    with pytest.raises(Problem) as raised:
        await code(runtime, code="print(1)", language="lua")
    assert raised.value.kind == "unsupported_language" and "needs lua" in raised.value.message


@pytest.mark.parametrize(
    ("files", "fetch_files", "named"),
    [
        ({"in.txt": "not base64!"}, [], "in.txt"),
        ({"../up.txt": b64(b"x")}, [], "../up.txt"),
        ({}, ["/work/../etc/passwd"], "../etc/passwd"),
    ],
    ids=["bad-base64", "climbing-path", "climbing-absolute-fetch"],
)
def test_a_bad_file_is_refused_naming_it(files: dict[str, str], fetch_files: list[str], named: str) -> None:
    with pytest.raises(ValidationError) as raised:  # the route answers it as a 400
        RunCodeRequest.model_validate({"code": "pass", "language": "python", "files": files, "fetch_files": fetch_files})
    assert named in str(raised.value)


async def test_printing_a_verdict_cannot_change_it(runtime: Runtime) -> None:
    program = "import sys; print('Success'); print('TimeLimitExceeded', file=sys.stderr); sys.exit(1)"
    response = await code(runtime, code=program, language="python")
    assert (response.status, response.run_result.status, response.run_result.return_code) == ("Failed", "Finished", 1)


async def test_stderr_output_does_not_fail_a_clean_exit(runtime: Runtime) -> None:
    response = await code(runtime, code="echo 'Error: SandboxError' >&2; exit 0", language="bash")
    assert (response.status, response.run_result.return_code) == ("Success", 0)
    assert response.run_result.stderr == "Error: SandboxError\n"


# -- cpp (bubblewrap where the host has g++, and Docker) --------------------------------------------


async def test_cpp_compiles_then_runs_with_stdin(cpp_runtime: Runtime) -> None:
    response = await code(cpp_runtime, code=SQUARE, language="cpp", stdin="9\n")
    assert response.status == "Success"
    assert (response.compile_result.status, response.compile_result.return_code) == ("Finished", 0)
    assert (response.run_result.return_code, response.run_result.stdout) == (0, "81\n")


async def test_a_cpp_compile_error_fails_without_a_run(cpp_runtime: Runtime) -> None:
    response = await code(cpp_runtime, code="int main() { return oops; }", language="cpp")
    assert response.status == "Failed" and response.run_result is None
    assert response.compile_result.return_code != 0 and "oops" in response.compile_result.stderr


async def test_a_cpp_runtime_error_has_both_results(cpp_runtime: Runtime) -> None:
    response = await code(cpp_runtime, code="#include <cstdlib>\nint main() { std::abort(); }", language="cpp")
    assert response.status == "Failed"
    assert response.compile_result.return_code == 0 and response.run_result.return_code == -6


async def test_a_cpp_program_past_its_run_timeout_is_time_limit_exceeded(cpp_runtime: Runtime) -> None:
    response = await code(cpp_runtime, code="int main() { for (;;) {} }", language="cpp", run_timeout=1)
    assert response.status == "Failed" and response.compile_result.return_code == 0
    assert (response.run_result.status, response.run_result.return_code) == ("TimeLimitExceeded", None)


async def test_a_cpp_program_reads_its_files_and_its_output_is_fetched(cpp_runtime: Runtime) -> None:
    program = (
        "#include <fstream>\n#include <string>\n"
        "int main() { std::string s; std::ifstream(\"in.txt\") >> s; std::ofstream(\"/work/out.txt\") << s << s; }\n"
    )
    response = await code(cpp_runtime, code=program, language="cpp", files={"in.txt": b64(b"ab")}, fetch_files=["/work/out.txt"])
    assert response.status == "Success" and response.files == {"/work/out.txt": b64(b"abab")}


# -- run_jupyter --------------------------------------------------------------------------------


async def test_jupyter_cells_share_one_namespace(runtime: Runtime) -> None:
    response = await notebook(runtime, "a = 123", "a += 1", "print(a)")
    assert (response.status, response.driver.status) == ("Success", "Finished")
    assert [cell.stdout for cell in response.cells] == ["", "", "124\n"]
    assert all(cell.error == [] and cell.display == [] for cell in response.cells)


async def test_a_last_expression_is_display_data_not_stdout(runtime: Runtime) -> None:
    response = await notebook(runtime, "a = 'hi'", "a * 2")
    assert response.cells[1].display == [{"text/plain": "'hihi'"}]
    assert response.cells[1].stdout == ""


async def test_a_stderr_write_shows_its_count_as_display_data_not_on_stdout(runtime: Runtime) -> None:
    response = await notebook(runtime, "import sys\nsys.stderr.write('twelve chars')")
    (cell,) = response.cells
    assert (cell.stdout, cell.stderr, cell.display) == ("", "twelve chars", [{"text/plain": "12"}])


@pytest.mark.parametrize("cell", ["print('x')", "x = 1", "len('abc');", "None", "def f(): return 1"])
async def test_a_cell_without_a_value_to_show_shows_nothing(runtime: Runtime, cell: str) -> None:
    response = await notebook(runtime, cell)
    assert response.cells[0].display == [] and response.cells[0].error == []


async def test_display_shows_each_object_with_its_rich_forms_in_order(runtime: Runtime) -> None:
    cell = (
        "class Table:\n"
        "    def _repr_html_(self): return '<table/>'\n"
        "    def __repr__(self): return 'Table()'\n"
        "print('before')\n"
        "display(Table(), 7)\n"
        "'last'"
    )
    response = await notebook(runtime, cell)
    (shown,) = response.cells
    assert shown.stdout == "before\n"
    assert shown.display == [
        {"text/html": "<table/>", "text/plain": "Table()"},
        {"text/plain": "7"},
        {"text/plain": "'last'"},
    ]


async def test_a_matplotlib_plot_is_an_image_png(runtime: Runtime) -> None:
    probe = await code(runtime, code="import matplotlib", language="python")
    if probe.status != "Success":
        pytest.skip("matplotlib is not installed where these sandboxes' python is (python3-matplotlib)")
    plot = "plt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()"
    response = await notebook(runtime, "import matplotlib.pyplot as plt", plot, "plt.figure(); plt.plot([1])")
    assert response.status == "Success" and all(cell.error == [] for cell in response.cells)
    (figure,) = response.cells[1].display
    assert base64.b64decode(figure["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert figure["text/plain"] == "<Figure size 640x480 with 1 Axes>"
    value, left_open = response.cells[2].display  # the cell's value, then the figure it left open
    assert value["text/plain"].startswith("[<matplotlib.lines.Line2D")
    assert "image/png" in left_open


async def test_jupyter_takes_files_and_fetches_what_the_cells_wrote(runtime: Runtime) -> None:
    cells = ("data = open('in.txt').read()", "open('/work/out.txt', 'w').write(data.upper())")
    response = await notebook(runtime, *cells, files={"in.txt": b64(b"abc")}, fetch_files=["/work/out.txt", "gone.txt"])
    assert response.status == "Success"
    assert response.files == {"/work/out.txt": b64(b"ABC")}


async def test_a_raising_cell_fills_its_error_and_later_cells_run(runtime: Runtime) -> None:
    response = await notebook(runtime, "a = 1", "1 / 0", "print(a + 1)")
    assert response.status == "Success"
    (error,) = response.cells[1].error
    assert (error["ename"], error["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert error["traceback"][-1] == "ZeroDivisionError: division by zero"
    assert (response.cells[2].stdout, response.cells[2].error) == ("2\n", [])


async def test_a_cell_past_its_timeout_fails_the_notebook(runtime: Runtime) -> None:
    response = await notebook(runtime, "a = 1", "import time; time.sleep(30)", "print(a)", cell_timeout=1)
    assert (response.status, response.driver.status) == ("Failed", "TimeLimitExceeded")
    assert response.cells == [] and response.driver.execution_time < 10
