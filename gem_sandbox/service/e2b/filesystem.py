"""envd's ``filesystem.Filesystem`` RPCs (unary Connect): ListDir, Stat, MakeDir, Remove and
Move, the SDK's ``files.list/exists/get_info/make_dir/remove/rename``.

The agent has no operation for these, so each is a small Python run in the sandbox as its
user (:data:`_SCRIPT`: the request on stdin, JSON on stdout), on work-dir-relative paths or
absolute ones elsewhere, with the kernel's permissions for that user. Its output is file
metadata for the client, never a verdict on code. e2b's semantics: a link is shown as what it
leads to, with its target; lists are depth-first; removing what is not there succeeds.
"""

from __future__ import annotations

import json
import posixpath
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from gem_sandbox.runtime import LeasedSandbox
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.service.e2b import connect
from gem_sandbox.service.e2b.envd import e2b_path, local_path, rpc, sandbox_of
from gem_sandbox.service.errors import Problem

RUN_TIMEOUT = 30.0  # seconds one file operation may take
READ_OUTPUT_BYTES = 48 * 1024 * 1024  # a file read outside the home dir comes as base64 JSON: 32 MB at most
_TYPES = {"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY"}
_STATUS = {"not_found": 404, "already_exists": 409, "invalid_argument": 400, "permission_denied": 403}

_SCRIPT = r"""
import base64, grp, json, os, pwd, shutil, stat, sys

PREFIX = "user.e2b."


def name(lookup, number):
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def entry(path):
    st = os.lstat(path)
    link = stat.S_ISLNK(st.st_mode)
    if link:  # e2b's way: the target's type, and where the link leads
        try:
            st = os.stat(path)
        except OSError:
            pass  # a dangling link is a file
    return {
        "path": os.path.normpath(path), "type": "dir" if stat.S_ISDIR(st.st_mode) else "file",
        "size": st.st_size, "mode": st.st_mode & 0o7777, "permissions": stat.filemode(st.st_mode),
        "owner": name(pwd.getpwuid, st.st_uid), "group": name(grp.getgrgid, st.st_gid),
        "mtime": st.st_mtime, "target": os.path.realpath(path) if link else None, "link": link,
        "metadata": stored_metadata(path),
    }


def stored_metadata(path):  # e2b's: the user.e2b.* extended attributes
    try:
        names = [n for n in os.listxattr(path) if n.startswith(PREFIX)]
        return {n[len(PREFIX):]: os.getxattr(path, n).decode("utf-8", "replace") for n in names}
    except OSError:
        return {}


def set_metadata(fd, given):
    for n in os.listxattr(fd):
        if n.startswith(PREFIX) and n[len(PREFIX):] not in given:
            os.removexattr(fd, n)
    for key, value in given.items():
        os.setxattr(fd, PREFIX + key, value.encode())


def listing(path, depth):
    if not os.path.isdir(path):
        raise NotADirectoryError
    entries = []

    def walk(folder, at):  # depth-first, each dir's entries in name order, as e2b lists
        for child in sorted(os.listdir(folder)):
            found = entry(os.path.join(folder, child))
            entries.append(found)
            if found["type"] == "dir" and not found["link"] and at < depth:
                walk(found["path"], at + 1)

    walk(path, 1)
    return {"entries": entries}


def answer(op, path, depth=1, destination=None, data=None, metadata=None):
    if op == "read":  # a regular file only: a device or fifo could answer forever
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise IsADirectoryError if stat.S_ISDIR(os.fstat(f.fileno()).st_mode) else OSError("not a regular file")
            return {"data": base64.b64encode(f.read()).decode()}
    if op == "write":
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
            set_metadata(f.fileno(), metadata or {})
        return {"entry": entry(path)}
    if op == "stat":
        return {"entry": entry(path)}
    if op == "list":
        return listing(path, depth)
    if op == "mkdir":
        if os.path.lexists(path):
            raise FileExistsError
        os.makedirs(path)
        return {"entry": entry(path)}
    if op == "remove":  # a path that is not there is removed already, as e2b sees it
        if not os.path.lexists(path):
            return {}
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
except IsADirectoryError:
    result = {"error": "invalid_argument", "message": "is a directory"}
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


async def operate(sandbox: LeasedSandbox, op: str, path: str, **arguments: Any) -> dict[str, Any]:
    """Run one operation on an e2b path as the sandbox's user; a Problem if it failed."""
    order = dict(arguments, op=op, path=local_path(path, sandbox))
    if "destination" in order:
        order["destination"] = local_path(order["destination"], sandbox)
    if order["path"] == "." and op in ("remove", "move"):
        raise Problem(400, "invalid_argument", f"the home dir {path} itself cannot be removed or moved")
    answer = await _run(sandbox, order)
    if "error" in answer:
        code = answer["error"]
        raise Problem(_STATUS.get(code, 500), code, f"{path}: {answer['message']}")
    for entry in answer.get("entries", [answer["entry"]] if "entry" in answer else []):
        if entry["target"] is not None:  # as the client names it: /work/x is /home/user/x
            entry["target"] = e2b_path(local_path(entry["target"], sandbox))
    return answer


async def _operate(request: web.Request, op: str, path: str, **arguments: Any) -> dict[str, Any]:
    async with sandbox_of(request) as sandbox:
        return await operate(sandbox, op, path, **arguments)


async def _run(sandbox: LeasedSandbox, order: dict[str, Any]) -> dict[str, Any]:
    limits = RunLimits(max_output_bytes=READ_OUTPUT_BYTES) if order["op"] == "read" else None
    result = await sandbox.run(_SCRIPT, "python", stdin=json.dumps(order), timeout=RUN_TIMEOUT, limits=limits)
    if result.status is Status.INFRA_ERROR:
        raise Problem(503, "unavailable", f"the sandbox failed: {result.stderr.strip()}")
    answer = json_answer(result)
    if answer is None:
        raise Problem(500, "internal", f"the file operation {order['op']} failed ({result.status.value}): {result.stderr[-500:]}")
    return answer


def json_answer(result: ExecResult) -> dict[str, Any] | None:
    """The JSON object a service script printed, or None when it did not end ok with one
    (what a run prints is never trusted further)."""
    try:
        answer = json.loads(result.stdout) if result.status is Status.OK else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


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
        info["symlinkTarget"] = entry["target"]  # no isSymlink: the SDK would call it SYMLINK
    if entry["metadata"]:
        info["metadata"] = entry["metadata"]
    return info


ROUTES = (
    rpc("filesystem.Filesystem", "ListDir", list_dir),
    rpc("filesystem.Filesystem", "Stat", stat),
    rpc("filesystem.Filesystem", "MakeDir", make_dir),
    rpc("filesystem.Filesystem", "Remove", remove),
    rpc("filesystem.Filesystem", "Move", move),
)
