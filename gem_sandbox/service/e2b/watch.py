"""envd's directory watching: ``WatchDir`` (a Connect stream, the async SDK's
``files.watch_dir``) and ``CreateWatcher``, ``GetWatcherEvents`` and ``RemoveWatcher`` (the
sync SDK's, polled).

A watcher is a program spawned in the sandbox as its user (:data:`_SCRIPT`: inotify through
libc), so it sees exactly the dirs the sandbox's code could list. It prints one JSON line per
event, after a first line that says it is watching or why it cannot; the service turns them
into e2b's events. It ends when its stream does, when it is removed, or with the sandbox.
"""

from __future__ import annotations

import json
import logging
import secrets
import signal
from collections import deque
from typing import Any

import anyio
from aiohttp import web

from gem_sandbox.sandbox.spawned import Process
from gem_sandbox.sandbox.errors import ProcessEnded
from gem_sandbox.service.e2b import connect
from gem_sandbox.service.e2b.envd import e2b_of, local_path, rpc, sandbox_of
from gem_sandbox.service.e2b.process import DEFAULT_KEEPALIVE, KEEPALIVE_HEADER, seconds
from gem_sandbox.service.e2b.state import Watcher
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.state import Service

log = logging.getLogger(__name__)
MAX_PENDING = 10_000  # events a polled watcher keeps between polls; older ones are dropped
_STATUS = {"not_found": 404, "invalid_argument": 400, "permission_denied": 403}

_SCRIPT = r"""
import ctypes, json, os, struct, sys

ROOT, RECURSIVE = json.loads(os.environ.pop("GEM_WATCH"))
KINDS = ((0x100 | 0x80, "CREATE"), (0x2, "WRITE"), (0x200, "REMOVE"), (0x40, "RENAME"), (0x4, "CHMOD"))
MASK, IS_DIR = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200, 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
dirs = {}


def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def watch(relative, new=False):
    # Watch a dir (and, recursive, those in it). A new one may have filled before its watch
    # was in place: what it holds is told as created (and written, when not empty).
    wd = libc.inotify_add_watch(fd, os.path.join(ROOT, relative).encode("utf-8", "surrogateescape"), MASK)
    if wd < 0:
        return
    dirs[wd] = relative
    for entry in os.scandir(os.path.join(ROOT, relative) if relative else ROOT) if RECURSIVE or new else ():
        path = os.path.join(relative, entry.name)
        if new:
            say(name=path, type="EVENT_TYPE_CREATE")
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size:
                say(name=path, type="EVENT_TYPE_WRITE")
        if RECURSIVE and entry.is_dir(follow_symlinks=False):
            watch(path, new)


if not os.path.exists(ROOT):
    say(error="not_found", message="no such directory")
elif not os.path.isdir(ROOT):
    say(error="invalid_argument", message="not a directory")
elif not os.access(ROOT, os.R_OK | os.X_OK):
    say(error="permission_denied", message="permission denied")
else:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    watch("")
    say(watching=True)
    while True:
        data, at = os.read(fd, 1 << 16), 0
        while at < len(data):
            wd, mask, _, length = struct.unpack_from("iIII", data, at)
            name = data[at + 16 : at + 16 + length].rstrip(b"\0").decode("utf-8", "surrogateescape")
            at += 16 + length
            if wd not in dirs or not name:
                continue
            path = os.path.join(dirs[wd], name)
            kind = next((kind for bits, kind in KINDS if mask & bits), None)
            if kind:
                say(name=path, type="EVENT_TYPE_" + kind)
            if kind == "CREATE" and mask & IS_DIR and RECURSIVE:
                watch(path, new=True)
"""


async def watch_dir(request: web.Request) -> web.StreamResponse:
    message = await connect.first_message(request)
    keepalive = seconds(request.headers.get(KEEPALIVE_HEADER), DEFAULT_KEEPALIVE)
    process, lines = await _start(request, message)
    try:
        response = web.StreamResponse(headers={"Content-Type": connect.STREAM})
        await response.prepare(request)
        await response.write(connect.envelope({"start": {}}))
        while True:
            with anyio.move_on_after(keepalive) as silent:
                line = await lines.next()
            if silent.cancelled_caught:
                await response.write(connect.envelope({"keepalive": {}}))
            elif line is None:
                break
            else:
                await response.write(connect.envelope({"filesystem": line}))
    finally:
        await _stop(process)
    await response.write(connect.end_of_stream(Problem(502, "unavailable", "the watcher ended")))
    await response.write_eof()
    return response


async def create_watcher(request: web.Request) -> web.Response:
    message, state = await connect.message(request), e2b_of(request)
    process, lines = await _start(request, message)
    watcher_id = "w-" + secrets.token_urlsafe(9)
    state.watchers[watcher_id] = watcher = Watcher(process)

    async def follow() -> None:  # in the service's task group: polls come and go
        try:
            while (line := await lines.next()) is not None:
                watcher.events = [*watcher.events[1 - MAX_PENDING :], line]
        except Exception:  # a bug here must not take the service down
            log.exception("watcher %s failed", watcher_id)
        finally:
            del state.watchers[watcher_id]
            await _stop(process)

    Service.of(request).tasks.start_soon(follow)
    return connect.reply({"watcherId": watcher_id})


async def get_watcher_events(request: web.Request) -> web.Response:
    watcher = _watcher(request, await connect.message(request))
    events, watcher.events = watcher.events, []
    return connect.reply({"events": events})


async def remove_watcher(request: web.Request) -> web.Response:
    await _stop(_watcher(request, await connect.message(request)).process)
    return connect.reply({})


def _watcher(request: web.Request, message: dict[str, Any]) -> Watcher:
    watcher = e2b_of(request).watchers.get(str(message.get("watcherId", "")))
    if watcher is None:
        raise Problem(404, "not_found", f"watcher {message.get('watcherId')!r} not found")
    return watcher


async def _start(request: web.Request, message: dict[str, Any]) -> tuple[Process, _Lines]:
    """A watcher of the message's ``path`` (``recursive``), past its first line; its
    refusal (no such dir, a file, no permission) is a Problem."""
    async with sandbox_of(request) as sandbox:
        order = json.dumps([local_path(str(message.get("path", "")), sandbox), bool(message.get("recursive"))])
        process = await sandbox.spawn(_SCRIPT, "python", env={"GEM_WATCH": order})  # type: ignore[attr-defined]
    lines = _Lines(process)
    first = await lines.next()
    if first is None or "error" in first:
        await _stop(process)
        code = (first or {}).get("error", "unavailable")
        why = (first or {}).get("message", "the watcher could not start")
        raise Problem(_STATUS.get(code, 502), code, f"{message.get('path')}: {why}")
    return process, lines


class _Lines:
    """The JSON objects a watcher prints, one line each. Waiting for the next may be
    cancelled (a keepalive is due) and loses nothing, as an async generator's would."""

    def __init__(self, process: Process) -> None:
        self.process, self.buffer, self.ready = process, b"", deque[dict[str, Any]]()

    async def next(self) -> dict[str, Any] | None:
        """The next one, or None once the watcher ended."""
        while not self.ready:
            chunk = await self.process.next_output()
            if chunk is None:
                return None
            *lines, self.buffer = (self.buffer + chunk[1] if chunk[0] == 1 else self.buffer).split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not the watcher's: nothing else writes there, but never trust it
                if isinstance(event, dict):
                    self.ready.append(event)
        return self.ready.popleft()


async def _stop(process: Process) -> None:
    with anyio.CancelScope(shield=True):
        try:
            await process.signal(signal.SIGKILL)
        except ProcessEnded:
            pass
        await process.wait()


ROUTES = (
    rpc("filesystem.Filesystem", "WatchDir", watch_dir),
    rpc("filesystem.Filesystem", "CreateWatcher", create_watcher),
    rpc("filesystem.Filesystem", "GetWatcherEvents", get_watcher_events),
    rpc("filesystem.Filesystem", "RemoveWatcher", remove_watcher),
)
