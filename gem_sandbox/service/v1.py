"""The REST API under ``/v1``: one-shot runs and leased sandboxes (docs/service.md).

Request and answer bodies are pydantic models: the same declarations check each request
(a bad field answers 400 naming it) and make the OpenAPI document. A run's answer is always
its :class:`ExecResult`, whatever the code did; errors are the caller's (4xx) or the
service's (503), never the code's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.service.caps import Limits, Seconds
from gem_sandbox.service.codec import decode_files, encode_files
from gem_sandbox.service.errors import bad_request
from gem_sandbox.service.fields import Env, Files, RelativePath
from gem_sandbox.service.route import Route
from gem_sandbox.service.state import Service, describe, parse, tenant_of

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: the document's types are the types


class RunBody(_Body):
    code: str
    language: str = "python"
    stdin: str | None = None
    timeout: Seconds | None = None
    env: Env = {}
    limits: Limits | None = None


class OneShotBody(RunBody):
    files: Files = Field({}, description="path -> base64 content, written before the run")


class LeaseBody(_Body):
    ttl: Annotated[float, Field(gt=0, description="seconds the lease lives after its last request")] | None = None
    snapshot: str | None = Field(None, description="a snapshot of this token's: the sandbox starts from its state")


class SnapshotBody(_Body):
    ttl: Annotated[float, Field(gt=0, description="seconds the service keeps it")] | None = None


class ForkBody(_Body):
    n: Annotated[int, Field(ge=1, le=64, strict=False, description="branches, each a new lease")] = 1  # 2.0 too: JSON's integers


class ShellBody(_Body):
    command: str
    session: Name = "default"
    timeout: Seconds | None = None


class KernelBody(_Body):
    code: str
    kernel: Name = "default"
    timeout: Seconds | None = None
    display: bool = Field(False, description="the last expression's value as display data (a notebook's Out), not printed")


class KernelRestartBody(_Body):
    kernel: Name = "default"


class WriteFilesBody(_Body):
    files: Files = Field(description="path -> base64 content")
    dest: RelativePath = "."
    executable: list[RelativePath] = []
    directories: list[RelativePath] = []


class ExecResultModel(BaseModel):
    status: Literal[tuple(s.value for s in Status)]  # type: ignore[valid-type]
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    truncated: bool
    duration_ms: float
    cpu_ms: float
    display: list[dict[str, Any]] = Field([], description="kernels: what the code showed, as MIME bundles")
    display_value: int | None = Field(None, description="which of display is the code's value (a notebook's Out)")


class LeaseModel(BaseModel):
    id: str
    backend: str
    languages: list[str]
    isolation: str | None
    alive: bool = Field(description="false once the sandbox died: its runs answer infra_error; lease a new one")
    ttl: float
    expires_in: float


class LeaseList(BaseModel):
    sandboxes: list[LeaseModel]


class SnapshotModel(BaseModel):
    id: str
    size: int = Field(description="bytes of state kept")
    created: float = Field(description="unix time")
    expires: float = Field(description="unix time; then it is dropped")
    kernels: list[str]
    shells: list[str]


class SnapshotList(BaseModel):
    snapshots: list[SnapshotModel]


class ReadQuery(_Body):
    path: list[RelativePath] = Field(min_length=1, description="a file to read; repeat for more")


class FilesModel(BaseModel):
    files: dict[str, str] = Field(description="path -> base64 content")


# -- handlers ----------------------------------------------------------------------------


def answer(result: ExecResult) -> web.Response:
    return web.json_response(result.to_json())


async def one_shot(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, OneShotBody)
    result = await service.runs.run(
        body.code,
        body.language,
        stdin=body.stdin,
        timeout=service.timeout(body.timeout),
        env=body.env,
        files=decode_files(body.files) or None,
        limits=service.limits(body.limits),
    )
    return answer(result)


async def create_lease(request: web.Request) -> web.Response:
    service, body, tenant = Service.of(request), await parse(request, LeaseBody), tenant_of(request)
    if body.snapshot is None:
        lease = await service.leases.create(tenant, body.ttl)
    else:
        lease = await service.leases.restore(tenant, body.snapshot, body.ttl)
    return web.json_response(lease.describe(), status=201)


async def take_snapshot(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, SnapshotBody)
    snapshot = await service.leases.take_snapshot(tenant_of(request), request.match_info["id"], body.ttl)
    return web.json_response(snapshot.to_json(), status=201)


async def fork(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, ForkBody)
    leases = await service.leases.fork(tenant_of(request), request.match_info["id"], body.n)
    return web.json_response({"sandboxes": [lease.describe() for lease in leases]}, status=201)


async def list_snapshots(request: web.Request) -> web.Response:
    snapshots = Service.of(request).leases.snapshots_of(tenant_of(request))
    return web.json_response({"snapshots": [snapshot.to_json() for snapshot in snapshots]})


async def delete_snapshot(request: web.Request) -> web.Response:
    await Service.of(request).leases.drop_snapshot(tenant_of(request), request.match_info["id"])
    return web.Response(status=204)


async def list_leases(request: web.Request) -> web.Response:
    leases = Service.of(request).leases.owned_by(tenant_of(request))
    return web.json_response({"sandboxes": [lease.describe() for lease in leases]})


async def get_lease(request: web.Request) -> web.Response:
    lease = Service.of(request).leases.find(tenant_of(request), request.match_info["id"])
    lease.renew()  # a look is a request too: it keeps the lease
    return web.json_response(lease.describe())


async def delete_lease(request: web.Request) -> web.Response:
    await Service.of(request).leases.delete(tenant_of(request), request.match_info["id"])
    return web.Response(status=204)


async def run(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, RunBody)
    async with service.sandbox(request) as sandbox:
        result = await sandbox.run(
            body.code,
            body.language,
            stdin=body.stdin,
            timeout=service.timeout(body.timeout),
            env=body.env,
            limits=service.limits(body.limits),
        )
    return answer(result)


async def shell(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, ShellBody)
    async with service.sandbox(request) as sandbox:
        result = await sandbox.shell(body.command, session=body.session, timeout=service.timeout(body.timeout))
    return answer(result)


async def kernel(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, KernelBody)
    async with service.sandbox(request) as sandbox:
        timeout = service.timeout(body.timeout)
        result = await sandbox.kernel_exec(body.code, kernel=body.kernel, timeout=timeout, display=body.display)
    return answer(result)


async def kernel_restart(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, KernelRestartBody)
    async with service.sandbox(request) as sandbox:
        await sandbox.kernel_restart(body.kernel)
    return web.Response(status=204)


async def write_files(request: web.Request) -> web.Response:
    service, body = Service.of(request), await parse(request, WriteFilesBody)
    async with service.sandbox(request) as sandbox:
        await sandbox.write_files(
            decode_files(body.files), dest=body.dest, executable=body.executable, directories=body.directories
        )
    return web.Response(status=204)


async def read_files(request: web.Request) -> web.Response:
    service = Service.of(request)
    try:
        query = ReadQuery(path=request.query.getall("path", []))
    except ValidationError as exc:
        raise bad_request(f"name the files to read as ?path=a&path=b: {describe(exc)}") from None
    async with service.sandbox(request) as sandbox:
        files = await sandbox.read_files(query.path)
    return web.json_response({"files": encode_files(files)})


async def reset(request: web.Request) -> web.Response:
    async with Service.of(request).sandbox(request) as sandbox:
        await sandbox.reset()
    return web.Response(status=204)


SB = "/v1/sandboxes/{id}"
ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/run", one_shot, "One stateless run on any warm sandbox", OneShotBody, ExecResultModel, errors=(409, 507)),
    Route("POST", "/v1/sandboxes", create_lease, "Lease a sandbox", LeaseBody, LeaseModel, status=201, errors=(404,)),
    Route("GET", "/v1/sandboxes", list_leases, "This token's leases", answer=LeaseList),
    Route("GET", SB, get_lease, "One lease", answer=LeaseModel),
    Route("DELETE", SB, delete_lease, "End a lease; the sandbox is reset for its next tenant", status=204),
    Route("POST", f"{SB}/run", run, "Run code in a fresh process", RunBody, ExecResultModel),
    Route("POST", f"{SB}/shell", shell, "A command in a persistent shell session", ShellBody, ExecResultModel),
    Route("POST", f"{SB}/kernel", kernel, "Code in a persistent Python namespace", KernelBody, ExecResultModel),
    Route("POST", f"{SB}/kernel/restart", kernel_restart, "Drop a kernel's namespace", KernelRestartBody, status=204),
    Route("PUT", f"{SB}/files", write_files, "Write files into the work dir", WriteFilesBody, status=204, errors=(409, 507)),
    Route("GET", f"{SB}/files", read_files, "Read files from the work dir", answer=FilesModel, query=ReadQuery, errors=(409, 507)),
    Route("POST", f"{SB}/reset", reset, "Back to a clean sandbox, keeping the lease", status=204),
    Route("POST", f"{SB}/snapshot", take_snapshot, "Keep its files, kernels and shells as a snapshot", SnapshotBody, SnapshotModel, status=201, errors=(409,)),
    Route("POST", f"{SB}/fork", fork, "New leases that start from its state now", ForkBody, LeaseList, status=201, errors=(409,)),
    Route("GET", "/v1/snapshots", list_snapshots, "This token's snapshots", answer=SnapshotList),
    Route("DELETE", "/v1/snapshots/{id}", delete_snapshot, "Drop a snapshot", status=204),
)
