"""SandboxFusion's ``/run_code`` and ``/run_jupyter`` on a :class:`Runtime`'s sandboxes.

Clients written for SandboxFusion (its ``sandbox-fusion`` package, verl's reward code and
``SandboxFusionTool``) send these request bodies and read these answers; this module turns
them into runs and kernel commands on our pool, so those clients move by changing their
endpoint (docs/service.md, "SandboxFusion"). :data:`ROUTES` parse the requests and render the
answers; the models here are also what the OpenAPI document shows.

Every verdict comes from the :class:`ExecResult` statuses the sandbox layer observed, never
from what the code printed (design.md §3, "Where a verdict comes from"): a program cannot
write its way to ``Success``, and only the infrastructure's failure is ``SandboxError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

import anyio
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from gem_sandbox.runtime import LeasedSandbox, Runtime
from gem_sandbox.sandbox.errors import FileTransferError, UnsafePath, UnsupportedLanguage
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.service import caps
from gem_sandbox.service.caps import Seconds
from gem_sandbox.service.codec import decode_files, encode_files, work_path
from gem_sandbox.service.errors import ERROR, Problem, Shape, bad_request
from gem_sandbox.service.fields import INTEGRAL, FetchPath, PlacedFiles, PlacedFilesOrNull
from gem_sandbox.service.route import Route
from gem_sandbox.service.runs import CountedSandbox, Runs
from gem_sandbox.service.state import Service, parse

STATELESS = ("python", "bash")  # no compile phase: run on any warm sandbox when no files cross
KERNEL = "fusion"
DEFAULT_WORKDIR = "/work"  # every backend's; a leased sandbox's hello names its own
_EXCEPTION_LINE = re.compile(r"(?P<ename>[A-Za-z_][\w.]*)(?:: ?(?P<evalue>.*))?")

FILES = (
    "path -> base64 content, written before the code runs: a path relative to the work dir (where"
    " the code runs) or an absolute one inside it; an absolute path elsewhere answers 400"
)
FETCH = (
    "paths read back after the code ran, answered in `files` under the names given; missing ones,"
    " and absolute paths outside the work dir, are left out"
)

# -- requests and answers (SandboxFusion's field names) --------------------------------------


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    compile_timeout: Seconds = 10
    run_timeout: Seconds = 10
    code: str
    stdin: str | None = None
    language: str = Field(description="any language the sandboxes' agent serves (the OpenAPI document lists them)")
    files: PlacedFilesOrNull = Field({}, description=f"{FILES} (null: skipped)")
    fetch_files: list[FetchPath] = Field([], description=FETCH)
    memory_limit_MB: Annotated[int, INTEGRAL] = Field(-1, description="MiB a run may use, capped at the service's; -1 or 0: the service's")


class RunJupyterRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    cells: list[str] = Field(description="Python cells, run in order in one namespace")
    cell_timeout: float = Field(0, ge=0, description="seconds per cell; 0: whatever is left of total_timeout")
    total_timeout: Seconds = 45
    kernel: Literal["python3"] = "python3"
    files: PlacedFiles = Field({}, description=FILES)
    fetch_files: list[FetchPath] = Field([], description=FETCH)


RunStatus = Literal["Success", "Failed", "SandboxError"]

#: SandboxFusion's errors, as its FastAPI server writes them (``{"detail": "..."}``), with the
#: service's own ``error`` beside it for clients of both.
FUSION_ERROR = Shape(
    "FusionError",
    lambda problem: {"detail": problem.message, **problem.body()},
    {
        "type": "object",
        "properties": {"detail": {"type": "string"}, "error": ERROR.schema["properties"]["error"]},
        "required": ["detail", "error"],
    },
)


class CommandRunResult(BaseModel):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = Field(None, description="seconds")
    cpu_time: float | None = Field(None, description="seconds")
    return_code: int | None = Field(None, description="the exit code, or minus the signal that ended it")
    stdout: str = ""
    stderr: str = ""


class RunCodeResponse(BaseModel):
    status: RunStatus
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = Field(None, description="the id of the sandbox that ran it, if one was leased")
    files: dict[str, str] = Field({}, description="path -> base64 content of the fetched files")


class CellRunResult(BaseModel):
    stdout: str
    stderr: str
    display: list[dict[str, Any]] = Field(
        [],
        description="what the cell showed, in order, as MIME bundles (`text/plain`, `image/png` as base64, ...):"
        " the value of its last expression unless None or silenced by `;`, `display()`, matplotlib figures",
    )
    error: list[dict[str, Any]] = Field([], description="{ename, evalue, traceback} when the cell raised")


class RunJupyterResponse(BaseModel):
    status: RunStatus
    message: str = ""
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = []
    executor_pod_name: str | None = None
    files: dict[str, str] = {}


# -- the two routes ---------------------------------------------------------------------------


async def run_code(runtime: Runtime | Runs, request: RunCodeRequest, *, max_timeout: float) -> RunCodeResponse:
    """Run ``request.code`` once, in whatever language the sandboxes' agent serves: a compiled
    one compiles first, in the agent's compile phase (``compile_timeout``), and runs only if
    that succeeded. A python or bash run with no files to write or fetch is a stateless run
    on any warm sandbox; the rest lease one sandbox for the request. A language the agent
    does not serve is a 400 ``unsupported_language`` saying what is missing. The service
    passes its :class:`Runs`, so the runs are counted; any runtime will do."""
    files = _decode({path: text for path, text in request.files.items() if text is not None})
    _check_paths(request.fetch_files)
    run_timeout = caps.timeout(request.run_timeout, max_timeout)
    limits = _limits(runtime.config.limits, request.memory_limit_MB, max_timeout)
    try:
        if request.language in STATELESS and not files and not request.fetch_files:
            once = await runtime.run(request.code, request.language, stdin=request.stdin, timeout=run_timeout, limits=limits)
            return _code_answer(once)
        async with runtime.lease() as sandbox:
            files = _placed(files, _workdir(sandbox))
            if files:
                await sandbox.write_files(files)
            ran = await sandbox.run(
                request.code,
                request.language,
                stdin=request.stdin,
                timeout=run_timeout,
                limits=limits,
                compile_timeout=caps.timeout(request.compile_timeout, max_timeout),
            )
            broken = _infra_failure(step for step in (ran.compile, ran) if step is not None)
            fetched = await _fetch(sandbox, request.fetch_files) if broken is None else {}
            return _code_answer(ran, sandbox.id, fetched)
    except UnsupportedLanguage as exc:
        raise Problem(400, "unsupported_language", f"language {request.language!r} is not served here: {exc}") from None


async def run_jupyter(runtime: Runtime | Runs, request: RunJupyterRequest, *, max_timeout: float) -> RunJupyterResponse:
    """Run the cells in order in one kernel of a leased sandbox. A cell that raises fills its
    ``error`` and the next one runs; a cell that times out, or cells that outrun
    ``total_timeout``, fail the notebook (``TimeLimitExceeded``, no cells: SandboxFusion's rule)."""
    files = _decode(request.files)
    _check_paths(request.fetch_files)
    async with runtime.lease() as sandbox:
        files = _placed(files, _workdir(sandbox))
        if files:
            await sandbox.write_files(files)
        started = anyio.current_time()
        deadline = started + caps.timeout(request.total_timeout, max_timeout)
        results: list[ExecResult] = []
        timed_out = False
        for cell in request.cells:
            left = deadline - anyio.current_time()
            if left <= 0:
                timed_out = True
                break
            timeout = min(request.cell_timeout or left, left, max_timeout)
            result = await sandbox.kernel_exec(cell, kernel=KERNEL, timeout=timeout, display=True)
            results.append(result)
            if result.status in (Status.TIMEOUT, Status.INFRA_ERROR):
                timed_out = result.status is Status.TIMEOUT
                break
        elapsed = anyio.current_time() - started
        failure = _infra_failure(results)
        fetched = await _fetch(sandbox, request.fetch_files) if failure is None else {}
    answer = RunJupyterResponse(status="Success", executor_pod_name=sandbox.id, files=fetched)
    if failure is not None:
        answer.status, answer.message = "SandboxError", failure.stderr
        answer.driver = CommandRunResult(status="Error", execution_time=elapsed, stderr=failure.stderr)
    elif timed_out:
        answer.status = "Failed"
        answer.driver = CommandRunResult(status="TimeLimitExceeded", execution_time=elapsed)
    else:
        answer.driver = CommandRunResult(status="Finished", execution_time=elapsed, return_code=0)
        answer.cells = [_cell(result) for result in results]
    return answer


# -- from our results to SandboxFusion's --------------------------------------------------------


def _code_answer(result: ExecResult, pod: str | None = None, files: dict[str, str] | None = None) -> RunCodeResponse:
    """SandboxFusion's answer to a run: its compile phase, if it had one, as
    ``compile_result``, and the program's run as ``run_result`` unless the compile did not
    succeed (the result is then the compile's, and nothing ran). ``SandboxError`` (with the
    infrastructure's message) if a step hit ``infra_error``, else ``Success`` if every step
    exited 0, else ``Failed``."""
    compiled = result.compile
    ran = result if compiled is None or compiled.ok else None
    steps = [step for step in (compiled, ran) if step is not None]
    failure = _infra_failure(steps)
    if failure is not None:
        status, message = "SandboxError", failure.stderr
    else:
        status, message = ("Success" if all(map(_exited_zero, steps)) else "Failed"), ""
    return RunCodeResponse(
        status=status,
        message=message,
        compile_result=_command(compiled) if compiled else None,
        run_result=_command(ran) if ran else None,
        executor_pod_name=pod,
        files=files or {},
    )


def _command(result: ExecResult) -> CommandRunResult:
    if result.status is Status.INFRA_ERROR:
        status, return_code = "Error", None
    elif result.status is Status.TIMEOUT:
        status, return_code = "TimeLimitExceeded", None
    else:  # it ended on its own, or by a limit or signal: an exit code or minus the signal
        status = "Finished"
        return_code = result.exit_code if result.exit_code is not None else (-result.signal if result.signal else None)
    return CommandRunResult(
        status=status,
        execution_time=result.duration_ms / 1000,
        cpu_time=result.cpu_ms / 1000,
        return_code=return_code,
        stdout=result.stdout,
        stderr=result.stderr,
    )


def _cell(result: ExecResult) -> CellRunResult:
    """A cell's output; a cell that failed (by its status) gets an ``error`` entry whose name
    and value are read from its traceback's last line, for display only."""
    cell = CellRunResult(stdout=result.stdout, stderr=result.stderr, display=list(result.display))
    if not result.ok:
        lines = result.stderr.rstrip().splitlines()
        last = lines[-1] if lines else ""
        match = _EXCEPTION_LINE.fullmatch(last)
        ename, evalue = (match["ename"], match["evalue"] or "") if match else (result.status.value, last)
        cell.error = [{"ename": ename, "evalue": evalue, "traceback": lines}]
    return cell


def _exited_zero(result: ExecResult) -> bool:
    """SandboxFusion's success: the program ended by itself with 0 (output cut at the cap
    still counts, as its return code is 0)."""
    return result.exit_code == 0 and result.status in (Status.OK, Status.OUTPUT_LIMIT)


def _infra_failure(results: Iterable[ExecResult]) -> ExecResult | None:
    return next((result for result in results if result.status is Status.INFRA_ERROR), None)


# -- request checks and files -------------------------------------------------------------------


def _decode(files: Mapping[str, str]) -> dict[str, bytes]:
    """File contents from base64; an unsafe path answers 400 naming it too."""
    _check_paths(files)
    return decode_files(files)


def _check_paths(paths: Iterable[str]) -> None:
    """A path that climbs out answers 400 naming it, before a sandbox is leased (where an
    absolute path lands is :func:`_placed`'s and :func:`_fetch`'s, once one is)."""
    for path in paths:
        work_path(path, DEFAULT_WORKDIR)


def _workdir(sandbox: LeasedSandbox | CountedSandbox) -> str:
    return str(sandbox.hello.get("workdir", DEFAULT_WORKDIR))


def _placed(files: Mapping[str, bytes], workdir: str) -> dict[str, bytes]:
    """The files by their path in the work dir (:func:`.codec.work_path`); an absolute path
    outside it answers 400."""
    placed: dict[str, bytes] = {}
    for path, data in files.items():
        inside = work_path(path, workdir)
        if inside is None:
            raise bad_request(
                f"file {path!r} is outside the work dir {workdir}: the rest of the sandbox is read-only;"
                " name a path relative to the work dir, or inside it"
            )
        placed[inside] = data
    return placed


async def _fetch(sandbox: LeasedSandbox | CountedSandbox, paths: Iterable[str]) -> dict[str, str]:
    """The files among ``paths`` that are there, as base64 under the names the client gave;
    one by one, so a missing one (or one the code made a link or a directory, or one outside
    the work dir) is only left out, as SandboxFusion leaves out what is not a file."""
    workdir = _workdir(sandbox)
    fetched: dict[str, bytes] = {}
    for path in dict.fromkeys(paths):
        inside = work_path(path, workdir)
        if inside is None:
            continue
        try:
            fetched[path] = (await sandbox.read_files([inside]))[inside]
        except (FileTransferError, UnsafePath, KeyError):
            continue
    return encode_files(fetched)


def _limits(pool: RunLimits, memory_mb: int, max_timeout: float) -> RunLimits | None:
    """The pool's limits with ``memory_mb`` per run, capped as every API's are; None, the
    pool's as they are, for -1 or 0."""
    asked = caps.Limits(run_memory_mb=memory_mb) if memory_mb > 0 else None
    return caps.run_limits(pool, asked, max_timeout)


# -- the routes -----------------------------------------------------------------------------------


async def run_code_route(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, RunCodeRequest)
    answer = await run_code(service.runs, body, max_timeout=service.options.max_run_timeout)
    return web.json_response(answer.model_dump(mode="json"))


async def run_jupyter_route(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, RunJupyterRequest)
    answer = await run_jupyter(service.runs, body, max_timeout=service.options.max_run_timeout)
    return web.json_response(answer.model_dump(mode="json"))


ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/run_code",
        run_code_route,
        "SandboxFusion's run_code",
        RunCodeRequest,
        RunCodeResponse,
        operation="run_code",
        errors=(409, 504, 507),
        shape=FUSION_ERROR,
    ),
    Route(
        "POST",
        "/run_jupyter",
        run_jupyter_route,
        "SandboxFusion's run_jupyter",
        RunJupyterRequest,
        RunJupyterResponse,
        operation="run_jupyter",
        errors=(409, 504, 507),
        shape=FUSION_ERROR,
    ),
)
