"""envd's ``filesystem.Filesystem`` RPCs (unary Connect): ListDir, Stat, MakeDir, Remove and
Move, the SDK's ``files.list/exists/get_info/make_dir/remove/rename``.

The agent has no operation for these, so each is a small Python run in the sandbox
(:data:`_SCRIPT`: the request on stdin, JSON on stdout) on work-dir-relative paths. Its
output is file metadata for the client, never a verdict on code.
"""

from __future__ import annotations

import json
import posixpath
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from gem_sandbox.runtime import LeasedSandbox
from gem_sandbox.sandbox.result import Status
from gem_sandbox.service.e2b import connect
from gem_sandbox.service.e2b.envd import e2b_path, local_path, rpc, sandbox_of
from gem_sandbox.service.errors import Problem

RUN_TIMEOUT = 30.0  # seconds one file operation may take
_TYPES = {"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY", "symlink": "FILE_TYPE_SYMLINK"}
_STATUS = {"not_found": 404, "already_exists": 409, "invalid_argument": 400, "permission_denied": 403}

_SCRIPT = r"""
import grp, json, os, pwd, shutil, stat, sys


def name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def entry(path):
    st = os.lstat(path)
    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
    return {
        "path": os.path.normpath(path), "type": kind, "size": st.st_size, "mode": st.st_mode & 0o7777,
        "permissions": stat.filemode(st.st_mode), "owner": name(pwd.getpwuid, st.st_uid),
        "group": name(grp.getgrgid, st.st_gid), "mtime": st.st_mtime,
        "target": os.readlink(path) if kind == "symlink" else None,
    }


def listing(path, depth):
    if not os.path.isdir(path):
        raise NotADirectoryError
    entries, level = [], [(path, 1)]
    while level:
        folder, at = level.pop()
        for child in sorted(os.listdir(folder)):
            found = entry(os.path.join(folder, child))
            entries.append(found)
            if found["type"] == "dir" and at < depth:
                level.append((found["path"], at + 1))
    return {"entries": entries}


def answer(op, path, depth=1, destination=None):
    if op == "stat":
        return {"entry": entry(path)}
    if op == "list":
        return listing(path, depth)
    if op == "mkdir":
        if os.path.lexists(path):
            raise FileExistsError
        os.makedirs(path)
        return {"entry": entry(path)}
    if op == "remove":
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
        return {}
    os.lstat(path)
    if os.path.dirname(destination):
        os.makedirs(os.path.dirname(destination), exist_ok=True)
    os.rename(path, destination)
    return {"entry": entry(destination)}


try:
    result = answer(**json.load(sys.stdin))
except FileNotFoundError:
    result = {"error": "not_found", "message": "no such file or directory"}
except FileExistsError:
    result = {"error": "already_exists", "message": "already exists"}
except NotADirectoryError:
    result = {"error": "invalid_argument", "message": "not a directory"}
except PermissionError:
    result = {"error": "permission_denied", "message": "permission denied"}
except OSError as exc:
    result = {"error": "invalid_argument", "message": exc.strerror or str(exc)}
print(json.dumps(result))
"""


async def list_dir(request: web.Request) -> web.Response:
    message = await connect.message(request)
    depth = int(message.get("depth") or 1)
    if depth < 1:
        raise Problem(400, "invalid_argument", "depth must be at least 1")
    answer = await _operate(request, "list", str(message.get("path", "")), depth=depth)
    return connect.reply({"entries": [_entry_info(entry) for entry in answer["entries"]]})


async def stat(request: web.Request) -> web.Response:
    answer = await _operate(request, "stat", str((await connect.message(request)).get("path", "")))
    return connect.reply({"entry": _entry_info(answer["entry"])})


async def make_dir(request: web.Request) -> web.Response:
    answer = await _operate(request, "mkdir", str((await connect.message(request)).get("path", "")))
    return connect.reply({"entry": _entry_info(answer["entry"])})


async def remove(request: web.Request) -> web.Response:
    await _operate(request, "remove", str((await connect.message(request)).get("path", "")))
    return connect.reply({})


async def move(request: web.Request) -> web.Response:
    message = await connect.message(request)
    source, destination = str(message.get("source", "")), str(message.get("destination", ""))
    answer = await _operate(request, "move", source, destination=destination)
    return connect.reply({"entry": _entry_info(answer["entry"])})


async def _operate(request: web.Request, op: str, path: str, **arguments: Any) -> dict[str, Any]:
    """Run one operation in the request's sandbox; a Connect error if it failed."""
    async with sandbox_of(request) as sandbox:
        order = dict(arguments, op=op, path=local_path(path, sandbox))
        if "destination" in order:
            order["destination"] = local_path(order["destination"], sandbox)
        if order["path"] == "." and op in ("remove", "move"):
            raise Problem(400, "invalid_argument", f"the home dir {path} itself cannot be removed or moved")
        answer = await _run(sandbox, order)
    if "error" in answer:
        code = answer["error"]
        raise Problem(_STATUS.get(code, 500), code, f"{path}: {answer['message']}")
    return answer


async def _run(sandbox: LeasedSandbox, order: dict[str, Any]) -> dict[str, Any]:
    result = await sandbox.run(_SCRIPT, "python", stdin=json.dumps(order), timeout=RUN_TIMEOUT)
    if result.status is Status.INFRA_ERROR:
        raise Problem(503, "unavailable", f"the sandbox failed: {result.stderr.strip()}")
    try:
        answer = json.loads(result.stdout) if result.status is Status.OK else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise Problem(500, "internal", f"the file operation {order['op']} failed ({result.status.value}): {result.stderr[-500:]}")
    return answer


def _entry_info(entry: dict[str, Any]) -> dict[str, Any]:
    """envd's ``EntryInfo`` in ProtoJSON: lowerCamelCase, int64 as a string, enum names."""
    path = e2b_path(entry["path"])
    info = {
        "name": posixpath.basename(path),
        "type": _TYPES[entry["type"]],
        "path": path,
        "size": str(entry["size"]),
        "mode": entry["mode"],
        "permissions": entry["permissions"],
        "owner": entry["owner"],
        "group": entry["group"],
        "modifiedTime": datetime.fromtimestamp(entry["mtime"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if entry["target"] is not None:
        info["symlinkTarget"] = entry["target"]
    return info


ROUTES = (
    rpc("filesystem.Filesystem", "ListDir", list_dir),
    rpc("filesystem.Filesystem", "Stat", stat),
    rpc("filesystem.Filesystem", "MakeDir", make_dir),
    rpc("filesystem.Filesystem", "Remove", remove),
    rpc("filesystem.Filesystem", "Move", move),
)
