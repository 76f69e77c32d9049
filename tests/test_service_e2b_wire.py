"""The e2b endpoint's pieces that need no sandbox: Connect framing, error shapes, e2b paths,
the list's metadata filter and the code interpreter's reading of a traceback."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from gem_sandbox.service.e2b import connect, control, interpreter, wire
from gem_sandbox.service.e2b.envd import e2b_path, local_path
from gem_sandbox.service.errors import Problem


class Body:
    """A request as :func:`connect.first_message` reads it."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    async def read(self) -> bytes:
        return self.raw


class Box:
    hello: dict[str, Any] = {"workdir": "/work"}


def test_an_envelope_is_a_flag_a_big_endian_length_and_json() -> None:
    framed = connect.envelope({"event": {"start": {"pid": 7}}})
    assert framed[0] == 0 and int.from_bytes(framed[1:5], "big") == len(framed) - 5
    assert json.loads(framed[5:]) == {"event": {"start": {"pid": 7}}}
    assert connect.end_of_stream() == b"\x02\x00\x00\x00\x02{}"
    ended = connect.end_of_stream(Problem(504, "timeout", "too slow"))
    assert ended[0] == 2 and json.loads(ended[5:]) == {"error": {"code": "deadline_exceeded", "message": "too slow"}}


@pytest.mark.anyio
async def test_a_streaming_request_is_read_from_its_first_envelope() -> None:
    request: Any = Body(connect.envelope({"process": {"cmd": "/bin/bash"}}))
    assert await connect.first_message(request) == {"process": {"cmd": "/bin/bash"}}
    with pytest.raises(Problem, match="no Connect envelope"):
        await connect.first_message(Body(b"\x00"))  # type: ignore[arg-type]
    with pytest.raises(Problem, match="cut short"):
        await connect.first_message(Body(connect.envelope({"a": 1})[:-1]))  # type: ignore[arg-type]


def test_errors_take_e2bs_shapes() -> None:
    missing = Problem(404, "file_not_found", "no such file")
    assert json.loads(wire.plain_error(missing).body) == {"code": 404, "message": "no such file"}  # type: ignore[arg-type]
    assert json.loads(wire.connect_error(missing).body)["code"] == "not_found"  # type: ignore[arg-type]
    assert wire.connect_code(Problem(409, "already_exists", "x")) == "already_exists"
    assert wire.plain_error(missing).headers["Should-Retry"] == "false"
    assert "Should-Retry" not in wire.plain_error(Problem(429, "rate_limited", "slow down", retry_after=1)).headers


@pytest.mark.parametrize(
    ("path", "local"),
    [
        ("/home/user", "."),
        ("/home/user/a/b.txt", "a/b.txt"),
        ("a/./b.txt", "a/b.txt"),
        ("/work/x", "x"),
        ("", "."),
        ("/tmp/x", "/tmp/x"),
        ("/home/username", "/home/username"),
        ("a/../../b", "/home/b"),
    ],
)
def test_the_home_dir_is_the_work_dir_and_other_paths_stay_absolute(path: str, local: str) -> None:
    assert local_path(path, Box()) == local  # type: ignore[arg-type]


def test_e2b_paths_are_absolute() -> None:
    assert (e2b_path("."), e2b_path("a/b"), e2b_path("/tmp/c")) == ("/home/user", "/home/user/a/b", "/tmp/c")


def test_the_metadata_filter_undoes_the_sdks_double_encoding() -> None:
    raw = urlencode({quote("user id"): quote("a&b"), "k": "v"})  # what aiohttp hands over
    assert control._metadata_filter(raw) == {"user id": "a&b", "k": "v"}


def test_a_traceback_gives_the_errors_name_and_value() -> None:
    stderr = 'warned\nTraceback (most recent call last):\n  File "<cell>", line 1, in <module>\nKeyError: \'k\'\n'
    before, error = interpreter._traceback(stderr)
    assert before == "warned\n"
    assert (error["name"], error["value"]) == ("KeyError", "'k'")
    assert error["traceback"].startswith("Traceback")
    _, syntax = interpreter._traceback('  File "<cell>", line 1\n    x ===\n        ^\nSyntaxError: invalid syntax\n')
    assert (syntax["name"], syntax["value"]) == ("SyntaxError", "invalid syntax")
