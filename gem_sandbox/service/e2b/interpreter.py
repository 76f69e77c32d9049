"""The code interpreter's routes (``e2b-code-interpreter``'s ``run_code`` and its contexts),
on the agent's kernels: each context is a kernel of the sandbox (a persistent Python
namespace), the default one named ``default``.

``POST /execute`` answers NDJSON, one event per line: the cell's ``stdout`` and ``stderr``, an
``result`` per MIME bundle it showed (``display()``, matplotlib figures, and its last
expression's value as the main result, ``execution.text``), an ``error`` when its
:class:`~gem_sandbox.sandbox.result.ExecResult` says it failed (the traceback's last line gives
the name and value the SDK shows), ``number_of_executions`` and ``end_of_execution``. The
verdict is the result's status, never the output. Its stdout streams as it is written
(the kernel's output events); its stderr comes when it ends, with the traceback cut from it
into the ``error``.

The sandbox's ``envVars`` (and a context's ``cwd``) are set in a kernel before its first cell;
a cell's own ``env_vars`` only for that cell.
"""

from __future__ import annotations

import codecs
import json
import math
import secrets
import time
from typing import Any

import anyio
from aiohttp import web
from pydantic import BaseModel

from gem_sandbox.runtime import LeasedSandbox
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.service.e2b.envd import HOME, e2b_of, e2b_path, jupyter_tenant, local_path, sandbox_of
from gem_sandbox.service.e2b.javascript import LANGUAGES, NodeContext
from gem_sandbox.service.e2b.state import DEFAULT_CONTEXT, Context
from gem_sandbox.service.e2b.wire import Endpoint, plain_error
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.state import Service, parse

SETUP_TIMEOUT = 30.0  # seconds for the commands that set a kernel's env and cwd
_TRACEBACK = "Traceback (most recent call last):"
_FORMATS = {  # MIME type -> e2b's Result field
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}
_FAILURES = {
    Status.TIMEOUT: ("TimeoutError", "the cell ran past the service's limit of {timeout:g} s"),
    Status.OOM: ("MemoryError", "the cell ran out of memory"),
    Status.OUTPUT_LIMIT: ("OutputLimitError", "the cell printed more than the sandbox's output limit"),
    Status.KILLED: ("KilledError", "the cell was killed by a signal"),
    Status.INFRA_ERROR: ("SandboxError", "the sandbox failed; create a new one"),
}


class ExecuteBody(BaseModel):
    code: str
    context_id: str | None = None
    language: str | None = None
    env_vars: dict[str, str] | None = None


class ContextBody(BaseModel):
    language: str | None = None
    cwd: str | None = None


async def execute(request: web.Request) -> web.StreamResponse:
    service, body = Service.of(request), await parse(request, ExecuteBody)
    state = e2b_of(request)
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    async with sandbox_of(request) as sandbox:
        if body.context_id is not None:
            context = state.context(body.context_id)
        else:  # the language's default context
            language = _language(body.language, sandbox)
            context = state.contexts.setdefault(_default_id(language), Context(_default_id(language), language=language))
        if context.language != "python":
            return await _run_javascript(request, response, sandbox, context, body)
        await _ready(sandbox, context, state.env)
        saved = await _setup(sandbox, context, _set_env(body.env_vars)) if body.env_vars else None
        await response.prepare(request)
        result = await _run_streaming(service, sandbox, context, body.code, response)
        if result.status not in (Status.OK, Status.ERROR):
            context.ready = False  # a kernel killed or stuck is started afresh, without them
        elif saved is not None:
            await _setup(sandbox, context, _restore_env(json.loads(saved.stdout)))
    context.executions += 1
    for event in _events(result, context.executions, service.options.max_run_timeout):
        await response.write(_line(event))
    await response.write_eof()
    return response


async def _run_streaming(
    service: Service, sandbox: LeasedSandbox, context: Context, code: str, response: web.StreamResponse
) -> ExecResult:
    """Run a cell, writing its stdout to ``response`` as ``stdout`` events while it runs."""
    heard, hearing = anyio.create_memory_object_stream[bytes](math.inf)  # bounded by the output cap
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def forward() -> None:
        async with hearing:
            async for data in hearing:
                if chunk := text.decode(data):
                    await response.write(_line({"type": "stdout", "text": chunk, "timestamp": time.time_ns()}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(forward)
        with heard:
            return await service.runs.on(sandbox).kernel_exec(
                code,
                kernel=context.id,
                timeout=service.options.max_run_timeout,
                display=True,
                on_output=lambda fd, data: heard.send_nowait(data) if fd == 1 else None,
            )


async def _run_javascript(
    request: web.Request, response: web.StreamResponse, sandbox: LeasedSandbox, context: Context, body: ExecuteBody
) -> web.StreamResponse:
    """A cell of a JavaScript context (:mod:`.javascript`): its stdout as it comes, then its
    stderr, its value as the main result or its error."""
    service, state = Service.of(request), e2b_of(request)
    if body.env_vars:
        raise Problem(400, "bad_request", "a JavaScript cell takes no env_vars here: give the sandbox its envs")
    if context.node is None or not context.node.alive:
        context.node = await NodeContext.start(sandbox, {"HOME": HOME, **state.env}, e2b_path(context.cwd))
    await response.prepare(request)

    async def told(text: str) -> None:
        await response.write(_line({"type": "stdout", "text": text, "timestamp": time.time_ns()}))

    timeout = service.options.max_run_timeout
    cell = await context.node.run(body.code, timeout, told)
    context.executions += 1
    events: list[dict[str, Any]] = [{"type": "stderr", "text": cell.stderr, "timestamp": time.time_ns()}] if cell.stderr else []
    if cell.answer is None:
        failure = f"the cell ran past the service's limit of {timeout:g} s, or its context's process ended"
        events.append({"type": "error", "name": "TimeoutError", "value": failure, "traceback": cell.stderr})
    elif isinstance(error := cell.answer.get("error"), dict):
        events.append({"type": "error", **{key: str(error.get(key, "")) for key in ("name", "value", "traceback")}})
    elif "text" in cell.answer:
        events.append(_result({"text/plain": str(cell.answer["text"])}, main=True))
    events += [{"type": "number_of_executions", "execution_count": context.executions}, {"type": "end_of_execution"}]
    for event in events:
        await response.write(_line(event))
    await response.write_eof()
    return response


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


async def create_context(request: web.Request) -> web.Response:
    body = await parse(request, ContextBody)
    async with sandbox_of(request) as sandbox:
        language = _language(body.language, sandbox)
        cwd = local_path(body.cwd, sandbox) if body.cwd else "."
    context = Context("ctx-" + secrets.token_hex(8), cwd, language=language)
    e2b_of(request).contexts[context.id] = context
    return web.json_response(_describe(context))


async def list_contexts(request: web.Request) -> web.Response:
    return web.json_response([_describe(context) for context in e2b_of(request).contexts.values()])


async def remove_context(request: web.Request) -> web.Response:
    """Drop the context and its kernel's namespace (the default one comes back empty)."""
    state = e2b_of(request)
    context = state.context(request.match_info["id"])
    async with sandbox_of(request) as sandbox:
        await _restart(sandbox, context)
    del state.contexts[context.id]
    if context.id == DEFAULT_CONTEXT:
        state.contexts[DEFAULT_CONTEXT] = Context(DEFAULT_CONTEXT)
    return web.Response(status=204)


async def restart_context(request: web.Request) -> web.Response:
    context = e2b_of(request).context(request.match_info["id"])
    async with sandbox_of(request) as sandbox:
        await _restart(sandbox, context)
    context.ready, context.executions = False, 0
    return web.Response(status=204)


async def _restart(sandbox: LeasedSandbox, context: Context) -> None:
    """Drop a context's namespace: its kernel's, or its Node process."""
    if context.node is not None:
        await context.node.close()
        context.node = None
    else:
        await sandbox.kernel_restart(context.id)


def _describe(context: Context) -> dict[str, str]:
    return {"id": context.id, "language": context.language, "cwd": e2b_path(context.cwd)}


def _language(asked: str | None, sandbox: LeasedSandbox) -> str:
    """e2b's name of a context's language: Python (the default), or JavaScript where the
    sandbox has Node (the polyglot image, a host with node)."""
    if asked in (None, "python"):
        return "python"
    if asked in LANGUAGES and LANGUAGES[asked] in sandbox.hello.get("languages", ()):
        return "javascript"
    offered = ["python", *(["javascript"] if "nodejs" in sandbox.hello.get("languages", ()) else [])]
    raise Problem(400, "bad_request", f"no {asked!r} contexts in this sandbox; it offers {', '.join(offered)} (use commands for the rest)")


def _default_id(language: str) -> str:
    return DEFAULT_CONTEXT if language == "python" else f"{DEFAULT_CONTEXT}-{language}"


async def _ready(sandbox: LeasedSandbox, context: Context, env: dict[str, str]) -> None:
    """Give a fresh kernel the sandbox's env and the context's cwd."""
    if context.ready:
        return
    env = {"HOME": HOME, **env}
    chdir = f"__import__('os').chdir({e2b_path(context.cwd)!r})"
    await _setup(sandbox, context, f"{chdir}\n__import__('os').environ.update({env!r})")
    context.ready = True


def _set_env(env: dict[str, str]) -> str:
    """Set ``env``, printing the values it replaces as JSON (None: unset)."""
    saved = f"{{name: __import__('os').environ.get(name) for name in {list(env)!r}}}"
    return f"print(__import__('json').dumps({saved}))\n__import__('os').environ.update({env!r})"


def _restore_env(saved: dict[str, str | None]) -> str:
    unset = [name for name, value in saved.items() if value is None]
    kept = {name: value for name, value in saved.items() if value is not None}
    return f"[__import__('os').environ.pop(name, None) for name in {unset!r}]\n__import__('os').environ.update({kept!r})"


async def _setup(sandbox: LeasedSandbox, context: Context, code: str) -> ExecResult:
    """Run the service's own code in a context's kernel (each last line evaluates to None,
    so nothing is echoed and ``_`` is kept)."""
    result = await sandbox.kernel_exec(code, kernel=context.id, timeout=SETUP_TIMEOUT)
    if result.status is not Status.OK:
        raise Problem(503, "unavailable", f"the kernel of context {context.id} could not be set up ({result.status.value})")
    return result


def _events(result: ExecResult, executions: int, timeout: float) -> list[dict[str, Any]]:
    stamp = time.time_ns()
    stderr, error = result.stderr, None
    if result.status is Status.ERROR:
        stderr, error = _traceback(result.stderr)
    elif result.status is not Status.OK:
        name, value = _FAILURES[result.status]
        error = {"name": name, "value": value.format(timeout=timeout), "traceback": result.stderr}
    events: list[dict[str, Any]] = []  # stdout went as it was written (_run_streaming)
    events += [{"type": "stderr", "text": stderr, "timestamp": stamp}] if stderr else []
    events += [_result(bundle, i == result.display_value) for i, bundle in enumerate(result.display)]
    events += [{"type": "error", **error}] if error else []
    return [*events, {"type": "number_of_executions", "execution_count": executions}, {"type": "end_of_execution"}]


def _result(bundle: dict[str, Any], main: bool) -> dict[str, Any]:
    """A MIME bundle as e2b's ``Result``: its formats by e2b's names, the rest as ``extra``."""
    named = {_FORMATS[mime]: data for mime, data in bundle.items() if mime in _FORMATS}
    extra = {mime: data for mime, data in bundle.items() if mime not in _FORMATS}
    return {"type": "result", **named, **({"extra": extra} if extra else {}), "is_main_result": main}


def _traceback(stderr: str) -> tuple[str, dict[str, str]]:
    """The stderr before the traceback, and the error: name and value from the traceback's
    last line (``ZeroDivisionError: division by zero``), for display only."""
    start = stderr.find(_TRACEBACK)
    start = stderr.find('  File "<cell>"') if start < 0 else start
    start = max(start, 0)
    traceback = stderr[start:]
    last = next((line for line in reversed(traceback.splitlines()) if line.strip()), "")
    name, _, value = last.partition(": ")
    return stderr[:start], {"name": name.strip(), "value": value.strip(), "traceback": traceback}


ROUTES = (
    Endpoint("POST", "/execute", execute, jupyter_tenant, plain_error),
    Endpoint("POST", "/contexts", create_context, jupyter_tenant, plain_error),
    Endpoint("GET", "/contexts", list_contexts, jupyter_tenant, plain_error),
    Endpoint("DELETE", "/contexts/{id}", remove_context, jupyter_tenant, plain_error),
    Endpoint("POST", "/contexts/{id}/restart", restart_context, jupyter_tenant, plain_error),
)
