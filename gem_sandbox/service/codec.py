"""Files in JSON: base64, the one codec every API uses for file contents and raw data, and
the rule that places a path an API names inside a sandbox.

A bad value answers 400 naming what it was (a file's path, a field), never a traceback.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
from collections.abc import Mapping

from gem_sandbox.sandbox import transfer
from gem_sandbox.sandbox.errors import UnsafePath
from gem_sandbox.service.errors import bad_request


def decode(text: str, what: str) -> bytes:
    """``text`` from strict base64; 400 saying ``what`` was not valid."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"{what} is not valid base64") from None


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_files(files: Mapping[str, str]) -> dict[str, bytes]:
    """File contents by path, from base64; a bad one answers 400 naming its file."""
    return {path: decode(text, f"the content of {path!r}") for path, text in files.items()}


def encode_files(files: Mapping[str, bytes]) -> dict[str, str]:
    return {path: encode(data) for path, data in files.items()}


def work_path(path: str, workdir: str) -> str | None:
    """Where ``path``, as a client names it, is in a sandbox whose work dir is ``workdir``:
    the path relative to the work dir that file transfer takes. A relative path is relative
    to the work dir already (where code runs); an absolute one inside the work dir
    (``/work/out/a.txt``) is that same file. An absolute path elsewhere is None: the rest of
    a sandbox is its read-only image and its tmp dirs, which file transfer does not reach.
    A path that climbs out with ``..``, is empty or holds NUL answers 400, as the agent would
    refuse it (links and devices it refuses when it meets them)."""
    if path.startswith("/"):
        root = workdir.rstrip("/") + "/"
        if not path.startswith(root):
            return None
        inside = path[len(root) :]
    else:
        inside = path
    try:
        transfer.check_path(inside)
    except UnsafePath as exc:
        raise bad_request(f"file {path!r}: {exc}; name a file in the work dir {workdir}") from None
    return posixpath.normpath(inside)
