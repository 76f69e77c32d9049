"""Bytes in JSON: base64, the one codec every API uses for file contents and raw data.

A bad value answers 400 naming what it was (a file's path, a field), never a traceback.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

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
