"""envd's ``process.Process`` RPCs: the SDK's ``commands.run`` (foreground and background),
``commands.connect``, ``commands.kill``, ``send_stdin``, ``close_stdin``, ``commands.list``
and its PTYs (``pty.create``, ``send_stdin``, ``resize``, ``kill``).

``Start`` spawns the command in the sandbox (:meth:`Sandbox.spawn`: a run whose output
streams and whose stdin may stay open) and answers a Connect stream: a ``start`` event with
its pid, ``data`` events as it writes, a ``keepalive`` after ``Keepalive-Ping-Interval``
seconds of silence (the SDK's reads time out after 60), then the ``end`` event. The end is
the agent's verdict on the command: its exit code and how it ended, whatever it printed; a
command past its deadline ends the stream with ``deadline_exceeded``, as envd does. The
command's output is read by a task of the service (:func:`_follow`), not by the stream, so a
client that goes away leaves the command running, and ``Connect`` streams it again. A
``Start`` with ``pty`` runs the command on a pseudo-terminal of the agent's (``spawn(pty=)``):
its output comes as ``pty`` data, input goes to the terminal, ``Update`` resizes it.
"""

from __future__ import annotations

import logging
import shlex
import signal
from collections.abc import Callable
from typing import Any

import anyio
from aiohttp import web
from anyio.streams.memory import MemoryObjectReceiveStream

from gem_sandbox.sandbox.errors import ProcessEnded
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.service import codec
from gem_sandbox.service.e2b import connect
from gem_sandbox.service.e2b.envd import HOME, e2b_of, e2b_path, local_path, rpc, sandbox_gone, sandbox_of
from gem_sandbox.service.e2b.state import Command, E2bSandbox, Event
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.state import Service

KEEPALIVE_HEADER = "Keepalive-Ping-Interval"
TIMEOUT_HEADER = "connect-timeout-ms"
DEFAULT_KEEPALIVE = 50.0
log = logging.getLogger(__name__)
SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM, 9: signal.SIGKILL, 15: signal.SIGTERM}


async def start(request: web.Request) -> web.StreamResponse:
    message = await connect.first_message(request)
    size = _size(message["pty"]) if message.get("pty") is not None else None
    config = message.get("process") or {}
    keepalive = seconds(request.headers.get(KEEPALIVE_HEADER), DEFAULT_KEEPALIVE)
    timeout_ms = request.headers.get(TIMEOUT_HEADER)
    timeout = seconds(timeout_ms, 0.0) / 1000 if timeout_ms else None
    state = e2b_of(request)
    async with sandbox_of(request) as sandbox:
        code = _command_line(config, sandbox)
        process = await sandbox.spawn(  # type: ignore[attr-defined]
            code,
            "bash",
            stdin_open=bool(message.get("stdin")) or size is not None,
            timeout=timeout or None,
            env={"HOME": HOME, **state.env, **_strings(config.get("envs"))},
            pty=size,
        )
        command = Command(process, config, message.get("tag"), pty=size is not None)
        events = command.listen()
        if process.pid is not None:
            state.commands[process.pid] = command
        Service.of(request).tasks.start_soon(_follow, command, state, lambda: sandbox_gone(request))
        return await _stream(request, process.pid, events, keepalive)


async def connect_to(request: web.Request) -> web.StreamResponse:
    """``commands.connect``: a new stream of a running command, from its next output on."""
    command = _command(request, await connect.first_message(request))
    keepalive = seconds(request.headers.get(KEEPALIVE_HEADER), DEFAULT_KEEPALIVE)
    return await _stream(request, command.process.pid, command.listen(), keepalive)


async def send_signal(request: web.Request) -> web.Response:
    message = await connect.message(request)
    signum = SIGNALS.get(message.get("signal"))
    if signum is None:
        raise Problem(400, "invalid_argument", f"signal {message.get('signal')!r}: SIGNAL_SIGKILL or SIGNAL_SIGTERM")
    await _control(request, message, lambda process: process.signal(signum))
    return connect.reply({})


async def send_input(request: web.Request) -> web.Response:
    message = await connect.message(request)
    given = message.get("input") or {}
    data = codec.decode(given.get("pty") or given.get("stdin") or "", "input")
    await _control(request, message, lambda process: process.write(data))
    return connect.reply({})


async def stream_input(request: web.Request) -> web.StreamResponse:
    """The SDK's ``stream_input`` handles: a ``start`` naming the process, then its ``data``
    (stdin or pty input) in order, with keepalives, as one client stream."""
    command = None
    async for message in connect.messages(request, Service.of(request).options.max_body_bytes):
        if "start" in message:
            command = _command(request, message["start"])
        elif "data" in message:
            if command is None:
                raise Problem(400, "invalid_argument", "a stream of input starts with the process it is for")
            given = message["data"].get("input") or {}
            data = codec.decode(given.get("pty") or given.get("stdin") or "", "input")
            try:
                await command.process.write(data)
            except ProcessEnded:
                raise Problem(404, "not_found", "the process ended") from None
    response = web.StreamResponse(headers={"Content-Type": connect.STREAM})
    await response.prepare(request)
    await response.write(connect.envelope({}) + connect.end_of_stream())
    await response.write_eof()
    return response


async def update(request: web.Request) -> web.Response:
    """A PTY's new size (the SDK's ``pty.resize``)."""
    message = await connect.message(request)
    rows, cols = _size(message.get("pty") or {})
    await _control(request, message, lambda process: process.resize(rows, cols))
    return connect.reply({})


async def close_stdin(request: web.Request) -> web.Response:
    message = await connect.message(request)
    await _control(request, message, lambda process: process.close_stdin())
    return connect.reply({})


async def list_processes(request: web.Request) -> web.Response:
    commands = e2b_of(request).commands
    processes = [
        {"pid": pid, "config": command.config, **({"tag": command.tag} if command.tag else {})}
        for pid, command in commands.items()
        if command.process.running
    ]
    return connect.reply({"processes": processes})


async def _follow(command: Command, state: E2bSandbox, gone: Callable[[], bool]) -> None:
    """Read a command's output to its end, telling whoever listens, in the service's task
    group: a client that goes away stops listening, the command goes on. A command that
    ended because its sandbox did ends its streams as envd's do when the sandbox goes:
    ``unavailable``, after which the SDK asks ``/health`` and reports the sandbox gone."""
    process = command.process
    try:
        while (chunk := await process.next_output()) is not None:
            fd, data = chunk
            stream = "pty" if command.pty else "stdout" if fd == 1 else "stderr"
            command.tell((_event("data", {stream: codec.encode(data)}), None))
        result = await process.wait()
        if gone():
            command.tell((None, Problem(502, "unavailable", "the connection to the sandbox ended before the stream completed")))
        elif result.status is Status.TIMEOUT:
            command.tell((None, Problem(504, "deadline_exceeded", f"the command ran past its timeout of {process.timeout:g} s")))
        elif result.status is Status.INFRA_ERROR:
            command.tell((None, Problem(502, "unavailable", result.stderr.strip())))
        else:
            command.tell((_event("end", _end(result)), None))
    except Exception:  # a task of the service's: a bug here must not take the service down
        log.exception("following command %s failed", process.pid)
        command.tell((None, Problem(500, "internal", "following the command failed; see the service's log")))
    finally:
        command.close()
        if state.commands.get(process.pid or -1) is command:
            del state.commands[process.pid or -1]


async def _stream(
    request: web.Request, pid: int | None, events: MemoryObjectReceiveStream[Event], keepalive: float
) -> web.StreamResponse:
    """One Connect stream of a command: ``start``, then what it is told, with a keepalive
    after ``keepalive`` seconds of silence, to the end."""
    response = web.StreamResponse(headers={"Content-Type": connect.STREAM})
    await response.prepare(request)
    with events:
        if pid is not None:
            await response.write(connect.envelope(_event("start", {"pid": pid})))
        while True:
            with anyio.move_on_after(keepalive) as silent:
                try:
                    event, problem = await events.receive()
                except anyio.EndOfStream:
                    break
            if silent.cancelled_caught:
                await response.write(connect.envelope(_event("keepalive", {})))
            elif problem is not None:
                await response.write(connect.end_of_stream(problem))
                await response.write_eof()
                return response
            else:
                await response.write(connect.envelope(event))  # type: ignore[arg-type]
    await response.write(connect.end_of_stream())
    await response.write_eof()
    return response


def _end(result: ExecResult) -> dict[str, Any]:
    """envd's EndEvent for a command that ended: exited with a code, or killed by a signal
    (exit code -1, as Go reports it). Zero values are left out, as ProtoJSON does."""
    if result.exit_code is not None and result.signal is None:
        end: dict[str, Any] = {"exited": True, "status": f"exit status {result.exit_code}"}
        if result.exit_code:
            end.update(exitCode=result.exit_code, error=end["status"])
        return end
    try:
        name = signal.Signals(result.signal).name.lower().removeprefix("sig") if result.signal else result.status.value
    except ValueError:  # a real-time signal has no name
        name = str(result.signal)
    status = "signal: killed" if result.signal == signal.SIGKILL else f"signal: {name}"
    return {"exitCode": -1, "status": status, "error": status}


def _command(request: web.Request, message: dict[str, Any]) -> Command:
    """The running command the message's ``process.pid`` names; not_found when there is
    none (the SDK's kill then answers False)."""
    pid = (message.get("process") or {}).get("pid")
    command = e2b_of(request).commands.get(pid) if isinstance(pid, int) else None
    if command is None or not command.process.running:
        raise Problem(404, "not_found", f"process with pid {pid} not found")
    return command


async def _control(request: web.Request, message: dict[str, Any], action: Any) -> None:
    """``action`` on the running command the message names."""
    try:
        await action(_command(request, message).process)
    except ProcessEnded:
        raise Problem(404, "not_found", "the process ended") from None


def _command_line(config: dict[str, Any], sandbox: Any) -> str:
    """The bash code for a ProcessConfig: the SDK's ``/bin/bash -l -c <cmd>`` runs ``cmd``;
    any other program runs as itself. It starts with a ``cd`` into its ``cwd`` (the home dir
    by default) by e2b's name for it, so ``pwd`` says ``/home/user`` as in e2b."""
    cmd, args = config.get("cmd") or "", [str(a) for a in config.get("args") or []]
    if not cmd:
        raise Problem(400, "invalid_argument", "process.cmd is empty")
    if cmd in ("/bin/bash", "bash") and len(args) == 3 and args[:2] == ["-l", "-c"]:
        code = args[2]
    else:
        code = shlex.join([cmd, *args])
    cwd = e2b_path(local_path(config.get("cwd") or HOME, sandbox))
    return f"cd -- {shlex.quote(cwd)} && {code}"


def _size(pty: dict[str, Any]) -> tuple[int, int]:
    """(rows, cols) of envd's ``PTY`` message."""
    size = pty.get("size") or {}
    rows, cols = size.get("rows", 24), size.get("cols", 80)
    if not all(isinstance(n, int) and 0 < n < 1 << 16 for n in (rows, cols)):
        raise Problem(400, "invalid_argument", f"pty.size must be positive rows and cols, got {size!r}")
    return rows, cols


def _event(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"event": {kind: body}}


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


def seconds(text: str | None, default: float) -> float:
    try:
        return max(0.0, float(text)) if text is not None else default
    except ValueError:
        return default


ROUTES = (
    rpc("process.Process", "Start", start),
    rpc("process.Process", "Connect", connect_to),
    rpc("process.Process", "SendSignal", send_signal),
    rpc("process.Process", "SendInput", send_input),
    rpc("process.Process", "CloseStdin", close_stdin),
    rpc("process.Process", "Update", update),
    rpc("process.Process", "StreamInput", stream_input, streamed=True),
    rpc("process.Process", "List", list_processes),
)
