"""The trusted side of the HumanEval harness: the test, the expected values, and the verdict.

Sandbox code (see ``wire``), run in a kernel of its own uid beside the solution. Its first
cell (:mod:`gem_sandbox_envs.isolation`, this source, then ``seal`` and ``wire``) isolates the
interpreter and offers a public key (``EXCHANGE``); the second, ``main(...)``, opens the sealed prompt and test, so they exist
in the clear only in this process, whose memory, stdout and signals the solution's uid cannot
reach. It calls ``check(candidate)`` where ``candidate`` sends each call to the solution over
the socket and accepts only a literal back, within ``call_timeout`` seconds (the first
answer includes the solution's import). Its one line of stdout, JSON, is the verdict;
anything the test prints goes to /dev/null. The verdict names test lines by number only:
what it prints passes through the agent's memory, so it never carries the test's source.

Verdict kinds: ``passed``; ``assert`` (an assert of the test failed); ``test_error`` (the
test raised on a returned value); ``raised`` (the candidate raised); ``not_literal`` (an
answer that is no literal: an object, a ``repr`` trick); ``too_large``; ``timeout`` (no
answer in time); ``lost`` (the solution stopped serving or never started).
"""

# The cell runs gem_sandbox_envs.isolation first: every import here comes after it.
import base64
import json
import os
import socket
import sys
import time
import traceback

TEST_FILE = "<test>"
REFUSED_GRACE = 0.5  # seconds


class Broken(Exception):
    """The solution cannot be asked anything more; every later call raises this again, so a
    test that swallows exceptions still fails."""

    def __init__(self, kind, detail):
        Exception.__init__(self, detail)
        self.kind = kind


class CandidateRaised(Exception):
    """The candidate raised (the solution names the exception's type; only this process can
    make one of these)."""


class Remote:
    """The solution's functions, called over the socket."""

    def __init__(self, path, call_timeout):
        self.call_timeout = call_timeout
        self.broken = None
        self.pending = b""
        self.sock = self._connect(path, time.monotonic() + call_timeout)

    def _connect(self, path, deadline):
        """Connect, waiting for the socket to appear; a socket that exists but refuses for
        ``REFUSED_GRACE`` has no listener left (the solution binds and listens before its
        import, so it died)."""
        refused_since = None
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                sock.connect(path)
                return sock
            except OSError as exc:
                sock.close()
                now = time.monotonic()
                if isinstance(exc, ConnectionRefusedError) and refused_since is None:
                    refused_since = now
                if now >= deadline or (refused_since is not None and now - refused_since > REFUSED_GRACE):
                    self.broken = Broken("lost", "the solution never served its functions (%s)" % exc)
                    return None
                time.sleep(0.005)

    def close(self):
        """Hang up: the solution's server sees the end and its run exits."""
        if self.sock is not None:
            self.sock.close()

    def call(self, name, args, kwargs):
        if self.broken is None:
            try:
                return self._call(name, args, kwargs)
            except Broken as exc:
                self.broken = exc
        raise self.broken

    def _call(self, name, args, kwargs):
        deadline = time.monotonic() + self.call_timeout
        try:
            self.sock.settimeout(self.call_timeout)
            self.sock.sendall(repr((name, args, kwargs)).encode("utf-8") + b"\n")
        except OSError as exc:
            raise Broken("lost", "the solution's connection failed: %s" % exc)
        kind, text = self._answer(deadline)
        if kind == b"! ":
            raise CandidateRaised(text.decode("utf-8", "replace")[:100])
        try:
            return literal(text.decode("utf-8"))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise Broken("not_literal", "%s returned something that is not a literal" % name)

    def _answer(self, deadline):
        while b"\n" not in self.pending:
            if len(self.pending) > MAX_LINE:
                raise Broken("too_large", "an answer over %d bytes" % MAX_LINE)
            left = deadline - time.monotonic()
            if left <= 0:
                raise Broken("timeout", "no answer within %g s" % self.call_timeout)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError as exc:
                raise Broken("lost", "the solution's connection failed: %s" % exc)
            if not chunk:
                raise Broken("lost", "the solution stopped serving (it exited or was killed)")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        if line[:2] not in (b"= ", b"! "):
            raise Broken("not_literal", "an answer in no known form")
        return line[:2], line[2:]


def check(config):
    """Run the test against the solution; the verdict as a dict."""
    remote = Remote(config["socket"], config["call_timeout"])
    entry = config["entry_point"]

    def candidate(*args, **kwargs):
        return remote.call(entry, args, kwargs)

    namespace = {"__name__": "__check__"}
    exec(compile(config["prompt"], "<prompt>", "exec"), namespace)  # the test uses its helpers
    namespace[entry] = candidate
    exec(compile(config["test"], TEST_FILE, "exec"), namespace)
    try:
        namespace["check"](candidate)
        verdict = {"kind": "passed"}
    except AssertionError as exc:
        verdict = {"kind": "assert", "line": _test_line(exc)}
    except CandidateRaised as exc:
        verdict = {"kind": "raised", "name": str(exc)}
    except Broken as exc:
        verdict = {"kind": exc.kind, "detail": str(exc)}
    except Exception as exc:
        verdict = {"kind": "test_error", "name": type(exc).__name__, "line": _test_line(exc)}
    if remote.broken is not None:  # whatever the test did with the exception
        verdict = {"kind": remote.broken.kind, "detail": str(remote.broken)}
    remote.close()
    return verdict


def _test_line(exc):
    """The line of the test where ``exc`` was raised (its innermost frame in the test)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == TEST_FILE]
    return frames[-1].lineno if frames else None


def main(public, sealed):
    """Open the config the host sealed (base64) for this kernel, check, print the verdict."""
    verdict_out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        verdict = check(json.loads(EXCHANGE.open(public, base64.b64decode(sealed))))
    except BaseException as exc:  # the harness's own failure: never a pass
        verdict = {"kind": "harness_error", "name": type(exc).__name__}
    sys.stdout = verdict_out
    verdict_out.write(json.dumps(verdict) + "\n")
    verdict_out.flush()
