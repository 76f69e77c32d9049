"""The Connect protocol with the JSON codec, as envd's RPCs speak it (``POST
/<package.Service>/<Method>``).

Unary: the body is the bare JSON message, the answer too (:func:`message`, :func:`reply`);
errors are :func:`~.wire.connect_error`. Server streaming: the request is one envelope
(:func:`first_message`), the answer a run of envelopes (:func:`envelope`) closed by
:func:`end_of_stream`; client streaming, the other way round (:func:`messages`), with the content type :data:`STREAM` exactly (the SDK refuses
parameters on it). An envelope is one flag byte, the payload's length as 4 big-endian bytes,
then the payload.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web

from gem_sandbox.service.e2b.wire import connect_code
from gem_sandbox.service.errors import Problem

STREAM = "application/connect+json"
MESSAGE = 0x00
END_OF_STREAM = 0x02
_PREFIX = 5  # flag byte and length


async def message(request: web.Request) -> dict[str, Any]:
    """A unary request's message; an empty body is the empty message."""
    return _decode(await request.read() or b"{}")


def reply(answer: Mapping[str, Any]) -> web.Response:
    return web.json_response(dict(answer))


async def first_message(request: web.Request) -> dict[str, Any]:
    """The message of a streaming request's first envelope (a server-streaming call sends one)."""
    body = await request.read()
    if len(body) < _PREFIX:
        raise _invalid("the request holds no Connect envelope")
    length = int.from_bytes(body[1:_PREFIX], "big")
    if body[0] & 0x01 or len(body) < _PREFIX + length:
        raise _invalid("the request's envelope is compressed or cut short")
    return _decode(body[_PREFIX : _PREFIX + length])


async def messages(request: web.Request, limit: int) -> AsyncIterator[dict[str, Any]]:
    """The messages of a client-streaming request, each as its envelope arrives, to the
    end of the body (or an end-of-stream envelope); 413 for one over ``limit`` bytes."""
    while True:
        try:
            prefix = await request.content.readexactly(_PREFIX)
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise _invalid("the request ends inside an envelope") from None
            return
        if prefix[0] & 0x01:
            raise _invalid("compressed envelopes are not served")
        length = int.from_bytes(prefix[1:], "big")
        if length > limit:
            raise Problem(413, "resource_exhausted", f"a message of {length} bytes is over the service's limit of {limit}")
        payload = await request.content.readexactly(length)
        if prefix[0] & END_OF_STREAM:
            return
        yield _decode(payload)


def envelope(answer: Mapping[str, Any], flags: int = MESSAGE) -> bytes:
    payload = json.dumps(answer, separators=(",", ":")).encode()
    return bytes([flags]) + len(payload).to_bytes(4, "big") + payload


def end_of_stream(problem: Problem | None = None) -> bytes:
    """The last envelope of a stream: ``{}``, or the error that ended it."""
    if problem is None:
        return envelope({}, END_OF_STREAM)
    return envelope({"error": {"code": connect_code(problem), "message": problem.message}}, END_OF_STREAM)


def _decode(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise _invalid("the request is not a JSON message") from None
    if not isinstance(value, dict):
        raise _invalid("the request is not a JSON object")
    return value


def _invalid(message: str) -> Problem:
    return Problem(400, "invalid_argument", message)
