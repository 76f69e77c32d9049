"""The wire format: frames round-trip, and anything that is not a frame is refused."""

from __future__ import annotations

import json
import struct

import pytest

from gem_sandbox.agent import command, protocol


def split(frame: bytes) -> tuple[int, bytes]:
    return protocol.frame_length(frame[:4]), frame[4:]


def test_header_and_binary_payload_round_trip():
    header = {"id": 7, "op": "run", "code": "print('é')", "env": {"A": "1"}}
    payload = bytes(range(256))
    length, body = split(protocol.encode(header, payload))
    assert length == len(body)
    assert protocol.decode_body(body) == (header, payload)


def test_empty_payload_round_trips():
    length, body = split(protocol.encode({"id": 1, "op": "ping"}))
    assert protocol.decode_body(body) == ({"id": 1, "op": "ping"}, b"")


def test_length_prefix_below_the_header_length_field_is_refused():
    with pytest.raises(protocol.FrameError):
        protocol.frame_length(struct.pack(">I", 3))


def test_length_prefix_over_the_maximum_is_refused():
    with pytest.raises(protocol.FrameError):
        protocol.frame_length(struct.pack(">I", protocol.MAX_FRAME + 1))


def test_header_length_overrunning_the_frame_is_refused():
    with pytest.raises(protocol.FrameError, match="overruns"):
        protocol.decode_body(struct.pack(">I", 100) + b"{}")


def test_header_that_is_not_json_is_refused():
    with pytest.raises(protocol.FrameError, match="not JSON"):
        protocol.decode_body(struct.pack(">I", 3) + b"{no")


def test_header_without_an_integer_id_is_refused():
    head = json.dumps({"id": "7", "op": "ping"}).encode()
    with pytest.raises(protocol.FrameError, match="integer id"):
        protocol.decode_body(struct.pack(">I", len(head)) + head)


def test_encoding_a_frame_over_the_maximum_fails():
    with pytest.raises(protocol.FrameError, match="exceeds"):
        protocol.encode({"id": 1}, b"x" * protocol.MAX_FRAME)


def test_refusal_becomes_an_error_object():
    assert protocol.Refused("unsafe_path", "no").error() == {"type": "unsafe_path", "message": "no"}


def test_command_starts_the_mounted_package_with_options():
    argv = command(
        "/usr/bin/python3", uid_base=2000, workdir="/work", scratch=["/dev/shm", "/x"], gid=None
    )
    assert argv[:5] == ["/usr/bin/python3", "-s", "-E", "-m", "gem_agent"]
    options = argv[5:]
    assert options[options.index("--uid-base") + 1] == "2000"
    assert options[options.index("--workdir") + 1] == "/work"
    assert [options[i + 1] for i, o in enumerate(options) if o == "--scratch"] == ["/dev/shm", "/x"]
    assert "--gid" not in options
