"""The agent wire protocol, version 1 (standard library only; runs on Python >= 3.8).

Shared with the host (see ``HOST_SHARED`` in the package): both ends encode and cut frames
with this module, and the host checks paths by the agent's own rule before sending them.

One long-lived byte stream per sandbox carries frames both ways::

    frame   = u32 length (big-endian) of what follows, then:
              u32 header length H, H bytes of UTF-8 JSON header, then the binary payload

A request header is ``{"id": <int > 0>, "op": <str>, ...arguments}``. The agent answers each
request with exactly one response frame carrying the same ``id``, in any order (several
requests may be in flight; a ``spawn`` also sends event frames, which carry an ``event`` key,
before its response): ``{"id", "ok": true, ...}`` or
``{"id", "ok": false, "error": {"type": <str>, "message": <str>}}`` with a type from
``ERRORS``. On start the agent sends one unsolicited ``{"id": 0, "op": "hello", ...}`` frame
when it is ready, with ``version``, ``pid``, ``python`` (its version), ``languages``,
``features``, ``isolation`` (``"uid"``: each run has its own uid; ``"token"``: the agent is
not root, runs share its uid), ``workdir`` and ``tmpdir``.

Binary payloads are never base64'd: a run's stdout and stderr travel as one payload whose split
is given by ``stdout_len`` in the header; files travel as an uncompressed tar stream.

Operations (arguments -> response fields; payloads in brackets):

``ping`` -> ``{}``
``run`` language, code, stdin (true: the payload is its stdin), timeout, compile_timeout, env,
    cwd, limits, stateless, shared [stdin] -> result (a ``stateless`` run's also says whether
    the sandbox is now ``clean``: as a verified ``reset`` would leave it; a ``shared`` one, in
    uid mode only, runs beside others in a private dir with a group of its own and umask 077)
``kernel_exec`` kernel, code, timeout, limits, display, stream -> result (namespace persists
    per ``kernel``; ``limits`` bound the kernel process when it starts and each command's
    output), with ``display``: the MIME bundles (``{"text/plain": ..., "image/png": <base64>}``)
    the command showed, in order (``display()``, matplotlib figures and, when the request's
    ``display`` is true, the value of a last expression, which is otherwise printed as
    Python's prompt prints it; ``display_value`` is its index), and ``display_truncated``; all
    left out when it showed nothing. With ``stream``, its output also comes as it is written,
    in ``spawn``'s ``output`` event frames, before the result (which holds it all too)
``kernel_restart`` kernel -> ``{}``
``shell`` session, command, timeout, limits -> result (cwd and exports persist per
    ``session``)
``shell_close`` session -> ``{}``
``spawn`` language, code, stdin_open, timeout (None: none), env, cwd, limits, pty [stdin]
    -> ``run``'s result once the program ended, its output no longer in it; before that,
    frames with the request's ``id`` and an ``event``: ``{"event": "started", "pid"}``,
    then ``{"event": "output", "fd": 1 or 2}`` [bytes] as the program writes them. With
    ``pty`` (``[rows, cols]``) it runs on a pseudo-terminal of that size, its controlling
    terminal: its stdin, stdout and stderr are the pty's, all its output comes as fd 1
``process_input`` process (a ``spawn``'s request id), eof [bytes] -> ``{}`` (the bytes go
    to its stdin, which ``eof`` closes; ``no_process`` once it ended)
``process_signal`` process, signal -> ``{}`` (sent to the program's process group)
``process_resize`` process, rows, cols -> ``{}`` (its pty's new size)
``write_files`` dest, xattrs [tar] -> ``{"written": [paths]}`` (``xattrs``, when given: each
    written file's ``user.*`` extended attributes, the others removed)
``read_files`` paths -> ``{"missing": [paths]}`` [tar]
``reset`` -> ``{"killed": n}`` (then verified: no user process, empty work and tmp dirs)
``stats`` -> ``{"processes": n, "kernels": [names], "shells": [names], "runs_total",
    "rss_kb", "uptime_s"}``
``shutdown`` -> ``{}`` then the agent exits

Paths are relative to the work dir. ``limits`` is the host's ``RunLimits`` as a dict;
``timeout`` is in seconds (default 10).

A *result* header holds ``status`` (see ``STATUSES``), ``exit_code`` (``-N`` for death by
signal N), ``signal``, ``stdout_bytes``, ``stderr_bytes`` (bytes written, before capping),
``stdout_len`` (bytes of stdout in this payload), ``truncated``, ``duration_ms`` and
``cpu_ms``. A compiled language's has ``compile``: its compile phase's result header, with
``stdout`` and ``stderr`` as text instead of ``stdout_len``; when that is not ``ok`` nothing ran
and the result is the compile's.
"""

import binascii
import json
import struct

VERSION = 1
MAX_FRAME = 64 * 1024 * 1024
STATUSES = ("ok", "error", "timeout", "oom", "output_limit", "killed", "infra_error")
ERRORS = (
    "bad_request",
    "unknown_op",
    "unsupported_language",
    "unsafe_path",
    "file_error",
    "busy",
    "no_process",
    "reset_failed",
    "internal",
)

COMPILE_TIMEOUT = 10.0  # seconds a compiled language's compile phase gets by default
INTERRUPT_GRACE = 0.5  # seconds a shell command gets to stop after a timeout before the kill

_U32 = struct.Struct(">I")


class FrameError(ValueError):
    """Bytes on the stream do not form a valid frame."""


class Refused(Exception):
    """The agent declines a request: becomes an error response of type ``kind``."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind

    def error(self):
        return {"type": self.kind, "message": str(self)}


def text_bytes(text):
    """Code or input text as bytes for a file, pipe or payload: UTF-8, with the raw bytes of
    a ``surrogateescape`` decoding restored and any other lone surrogate passed through, so
    odd text reaches the program (which rejects invalid UTF-8 itself) instead of raising."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def encode(header, payload=b""):
    """One frame as bytes."""
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    body_len = 4 + len(head) + len(payload)
    if body_len > MAX_FRAME:
        raise FrameError("frame of %d bytes exceeds the %d byte limit" % (body_len, MAX_FRAME))
    return b"".join((_U32.pack(body_len), _U32.pack(len(head)), head, payload))


def frame_length(prefix):
    """The body length announced by a 4-byte prefix."""
    (length,) = _U32.unpack(prefix)
    if length < 4 or length > MAX_FRAME:
        raise FrameError("bad frame length %d" % length)
    return length


def decode_body(body):
    """``(header, payload)`` from a frame body (everything after the length prefix)."""
    (head_len,) = _U32.unpack_from(body)
    if head_len > len(body) - 4:
        raise FrameError("header length %d overruns a %d byte frame" % (head_len, len(body)))
    try:
        header = json.loads(body[4 : 4 + head_len].decode("utf-8"))
    except ValueError as exc:
        raise FrameError("header is not JSON: %s" % exc) from None
    if not isinstance(header, dict) or not isinstance(header.get("id"), int):
        raise FrameError("header must be an object with an integer id")
    return header, bytes(body[4 + head_len :])


class FrameDecoder:
    """Frames cut from a byte stream that arrives in pieces of any size. :meth:`feed` what
    came, then take :meth:`next_frame` until it returns ``None``. A bad length prefix raises
    :class:`FrameError` as soon as its 4 bytes are in, before any of its body is buffered."""

    def __init__(self):
        self._buffer = bytearray()
        self._length = None  # the body length of the frame being read, once its prefix came

    def feed(self, data):
        self._buffer += data

    def next_frame(self):
        """The next whole frame as ``(header, payload)``, or ``None`` until more bytes come."""
        if self._length is None:
            if len(self._buffer) < 4:
                return None
            self._length = frame_length(bytes(self._buffer[:4]))
        end = 4 + self._length
        if len(self._buffer) < end:
            return None
        with memoryview(self._buffer) as view:  # one copy of the body, not two
            body = bytes(view[4:end])
        del self._buffer[:end]
        self._length = None
        return decode_body(body)


def split_path(path):
    """The components of a path relative to the work dir; refuses anything that is not."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise Refused("unsafe_path", "bad path %r" % (path,))
    if path.startswith("/"):
        raise Refused("unsafe_path", "%r is absolute; give paths relative to the work dir" % path)
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise Refused("unsafe_path", "%r climbs out with '..'" % path)
    return parts


class Base64Lines:
    """The byte stream as text, for transports that carry only text (an e2b process's
    stdin and stdout): each chunk written is one line of base64. ``decode`` takes what
    arrived and returns the bytes of the lines it completed."""

    def __init__(self):
        self.partial = bytearray()

    @staticmethod
    def encode(data):
        return binascii.b2a_base64(data, newline=True)

    def decode(self, text):
        self.partial += text
        end = self.partial.rfind(b"\n")
        if end < 0:
            return b""
        lines, self.partial = self.partial[:end], self.partial[end + 1 :]
        try:
            return b"".join(binascii.a2b_base64(line) for line in lines.split(b"\n") if line.strip())
        except binascii.Error as exc:
            raise FrameError("a line of the base64 stream is not base64: %s" % exc) from None
