"""envd's file routes: ``POST /files`` (the SDK's ``files.write``) and ``GET /files``
(``files.read``): in the home dir through the agent's file transfer, elsewhere (``/tmp``) by
a run as the sandbox's user (:func:`.filesystem.operate`).

An upload is multipart (a part per file, its filename the file's path, or ``?path=`` for a
single file) or, from envd 0.5.7 on, the raw bytes of one file named by ``?path=``
(``Content-Encoding: gzip`` is undone by aiohttp before the body reaches us). Both also take
e2b's signed URLs in place of the access token (:func:`.envd.files_tenant`). An upload's
metadata (``X-Metadata-*`` headers) is kept as the files' ``user.e2b.*`` extended
attributes, where ``get_info`` and ``list`` find it.
"""

from __future__ import annotations

import base64
import email.policy
import posixpath
import re
from email.message import Message
from email.parser import BytesHeaderParser

from aiohttp import web

from gem_sandbox.service.e2b.envd import e2b_path, files_tenant, in_home, local_path, sandbox_of
from gem_sandbox.service.e2b.filesystem import operate
from gem_sandbox.service.e2b.wire import Endpoint, plain_error
from gem_sandbox.service.errors import Problem, bad_request

METADATA_HEADER = "x-metadata-"
XATTR_PREFIX = "user.e2b."  # where e2b keeps a file's metadata: extended attributes
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


async def upload(request: web.Request) -> web.Response:
    metadata = _metadata(request)
    uploads = _uploads(request, await request.read())
    async with sandbox_of(request) as sandbox:
        files = {local_path(path, sandbox): data for path, data in uploads}
        home = {path: data for path, data in files.items() if in_home(path)}
        if home:  # an overwrite without metadata drops the file's old metadata, as in e2b
            xattrs = {XATTR_PREFIX + key: value for key, value in metadata.items()}
            await sandbox.write_files(home, xattrs=xattrs)  # type: ignore[call-arg]
        for path, data in files.items():
            if not in_home(path):
                await operate(sandbox, "write", path, data=base64.b64encode(data).decode(), metadata=metadata)
    described = {"type": "file", **({"metadata": metadata} if metadata else {})}
    return web.json_response([{"name": posixpath.basename(path), "path": e2b_path(path), **described} for path in files])


async def download(request: web.Request) -> web.Response:
    path = request.query.get("path")
    if not path:
        raise bad_request("name the file to read: ?path=/home/user/...")
    async with sandbox_of(request) as sandbox:
        local = local_path(path, sandbox)
        if in_home(local):
            data = (await sandbox.read_files([local]))[local]
        else:
            data = base64.b64decode((await operate(sandbox, "read", local))["data"])
    return web.Response(body=data, content_type="application/octet-stream")


def _metadata(request: web.Request) -> dict[str, str]:
    """The upload's ``X-Metadata-<key>: <value>`` headers (the SDK's ``metadata=``), keys
    lowercased; 400 for a key that is no HTTP token or a value that is not printable ASCII."""
    metadata = {}
    for header, value in request.headers.items():
        if header.lower().startswith(METADATA_HEADER):
            key = header[len(METADATA_HEADER) :].lower()
            if not _TOKEN.fullmatch(key) or not _PRINTABLE.fullmatch(value):
                raise Problem(400, "invalid_argument", f"metadata {key!r}: keys are HTTP tokens, values printable ASCII")
            metadata[key] = value
    return metadata


def _uploads(request: web.Request, body: bytes) -> list[tuple[str, bytes]]:
    """(path as the client named it, content) of each file in the request."""
    path = request.query.get("path")
    if request.content_type != "multipart/form-data":
        if not path:
            raise bad_request("a raw upload names its file: ?path=/home/user/...")
        return [(path, body)]
    parts = _parts(body, request.headers.get("Content-Type", ""))
    if path is not None:
        if len(parts) != 1:
            raise bad_request("?path= names one file; send several files without it, each part's filename its path")
        return [(path, parts[0][1])]
    if not parts or any(not name for name, _ in parts):
        raise bad_request("each part of a multipart upload needs a filename: the file's path")
    return [(str(name), data) for name, data in parts]


def _parts(body: bytes, content_type: str) -> list[tuple[str | None, bytes]]:
    """The (filename, content) of each part of a multipart body, byte for byte."""
    header = Message()
    header["Content-Type"] = content_type
    boundary = header.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise bad_request("a multipart body needs a boundary in its Content-Type")
    parts = []
    for chunk in (b"\r\n" + body).split(b"\r\n--" + boundary.encode())[1:]:
        if chunk.startswith(b"--"):
            break
        head, found, content = chunk.partition(b"\r\n\r\n")
        if not found:
            raise bad_request("a part of the multipart body has no header end")
        headers = BytesHeaderParser(policy=email.policy.HTTP).parsebytes(head.lstrip(b" \t").removeprefix(b"\r\n"))
        parts.append((headers.get_filename(), content))
    return parts


ROUTES = (
    Endpoint("POST", "/files", upload, files_tenant, plain_error),
    Endpoint("GET", "/files", download, files_tenant, plain_error),
)
