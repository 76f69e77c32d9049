"""The trusted side of a terminal task's verification: the tests' files and the verdict channels.

Sandbox code, run in a kernel of its own uid in the fresh verifier sandbox. Its first cell
(:mod:`gem_sandbox_envs.isolation`, this source, then ``prepare(...)``) lays out what the test
run may read but not change: the tests under ``/tests``, the pytest runner and an empty ini under ``/tmp/gem-sandbox-verifier``
(all this uid's, read-only to others), and ``/logs/verifier`` (sticky and write-only to
others), whose verdict files (``reward.txt``, ``reward.json``, the runner's ``pytest.json``)
are fifos that only this process reads. The test run, another uid, can write to them but can
neither read them nor replace them, so everything written to a verdict file reaches this
process: a second writer (a program the tests ran, racing the verdict) adds bytes instead of
replacing them, and the verdict no longer parses. ``collect()``, after the run ended and its
processes were killed, drains the fifos and prints them as one JSON line on this process's
own stdout, which no other uid can write to.
"""

# The cell runs gem_sandbox_envs.isolation first: every import here comes after it.
import base64
import fcntl
import io
import json
import os
import tarfile

TESTS = "/tmp/gem-sandbox-tests"  # /tests in the image
LOGS = "/tmp/gem-sandbox-logs"  # /logs
VERDICTS = LOGS + "/verifier"
TOOLS = "/tmp/gem-sandbox-verifier"
CHANNEL_BYTES = 1 << 20  # a fifo's buffer; a writer past it blocks until the run times out
VERDICT_BYTES = 48 << 10  # the most of one channel reported: the cell's output has a cap
F_SETPIPE_SZ = 1031

CHANNELS = {}  # verdict file name -> the fifo's read end


def prepare(tests, runner, channels):
    """``tests``: base64 of a tar of the task's tests/; ``runner``: the pytest runner's
    source; ``channels``: the verdict file names to listen on."""
    os.umask(0o022)
    for directory in (TESTS, TOOLS, LOGS):
        os.mkdir(directory, 0o755)  # a fresh sandbox: one that has them already fails here
    _extract(base64.b64decode(tests), TESTS)
    _write(TOOLS + "/runner.py", runner.encode())
    _write(TOOLS + "/pytest.ini", b"[pytest]\n")
    os.mkdir(VERDICTS)
    os.chmod(VERDICTS, 0o1733)  # others may add files (a report), not list, remove or rename
    for name in channels:
        path = VERDICTS + "/" + name
        os.mkfifo(path)
        os.chmod(path, 0o622)
        # Read and write: the fifo always has a writer (this one), so draining never blocks
        # and never sees an end; nothing is ever written through this end.
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        fcntl.fcntl(fd, F_SETPIPE_SZ, CHANNEL_BYTES)
        CHANNELS[name] = fd
    print("ready")


def collect():
    """Print ``{name: text written to it}`` for every channel, as one JSON line; a channel
    given more than ``VERDICT_BYTES`` holds no verdict (a flood from another writer) and is
    reported as None."""
    written = {}
    for name, fd in CHANNELS.items():
        chunks = []
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        written[name] = data.decode("utf-8", "replace") if len(data) <= VERDICT_BYTES else None
        os.close(fd)
    CHANNELS.clear()
    print(json.dumps(written))


def _extract(data, root):
    """Regular files and directories only, each under ``root``: the tests come from the host,
    but a task directory is still no reason to write outside ``/tests``."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar.getmembers():
            parts = [part for part in member.name.split("/") if part not in ("", ".")]
            if not parts or ".." in parts or not (member.isfile() or member.isdir()):
                raise ValueError("unsafe test archive member %r" % member.name)
            path = os.path.join(root, *parts)
            os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
            if member.isdir():
                os.makedirs(path, 0o755, exist_ok=True)
            else:
                _write(path, tar.extractfile(member).read(), member.mode & 0o111)


def _write(path, data, executable=0):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, 0o755 if executable else 0o644)
    finally:
        os.close(fd)
