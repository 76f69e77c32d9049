"""The trusted side of a terminal task's verification: the tests' files and the verdict channels.

Sandbox code, run in a kernel of its own uid in the fresh verifier sandbox. Its first cell
(:mod:`gem_sandbox_envs.isolation`, this source, then ``prepare(...)``) lays out what the test
run may read but not change: the tests under ``/tests``, the pytest runner and an empty ini
under ``/tmp/gem-sandbox-verifier`` (all this uid's, read-only to others), and
``/logs/verifier`` (sticky and write-only to others), whose verdict files (``reward.txt``,
``reward.json``, the runner's ``pytest.json``) are fifos that only this process reads. The test
run, another uid, can write to them but can neither read them nor replace them, so everything
written to a verdict file reaches this process, each write as a chunk of its own: a second
writer (a program the tests ran, racing the verdict) adds a write instead of replacing one,
and the verdict is void. ``collect()``, after the run ended and its processes were killed,
prints what each fifo received as one JSON line on this process's own stdout, which no other
uid can write to.
"""

# The cell runs gem_sandbox_envs.isolation first: every import here comes after it.
import base64
import fcntl
import io
import json
import os
import select
import tarfile
import threading

TESTS = "/tmp/gem-sandbox-tests"  # /tests in the image
LOGS = "/tmp/gem-sandbox-logs"  # /logs
VERDICTS = LOGS + "/verifier"
TOOLS = "/tmp/gem-sandbox-verifier"
CHANNEL_BYTES = 1 << 20  # a fifo's buffer
VERDICT_BYTES = 48 << 10  # the most of one channel reported: the cell's output has a cap
F_SETPIPE_SZ = 1031

CHANNELS = {}  # verdict file name -> its Channel


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
        CHANNELS[name] = Channel(VERDICTS + "/" + name)
    print("ready")


class Channel:
    """One verdict fifo, drained by a thread as it is written, so each write arrives as a
    chunk of its own: a second writer shows as a second chunk, even one that wrote a prefix
    for the real verdict to complete."""

    def __init__(self, path):
        os.mkfifo(path)
        os.chmod(path, 0o622)
        # Read and write: the fifo always has a writer (this process), so it never reads as
        # ended; nothing is ever written through this end.
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        fcntl.fcntl(self.fd, F_SETPIPE_SZ, CHANNEL_BYTES)
        self.chunks = []
        self.size = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        while not self.stopping.is_set():
            if select.select([self.fd], [], [], 0.05)[0]:
                self._take(os.read(self.fd, 65536))

    def _take(self, chunk):
        self.size += len(chunk)
        if self.size <= VERDICT_BYTES:
            self.chunks.append(chunk)

    def result(self):
        """``{"text": ..., "writes": n}``, or None when flooded past ``VERDICT_BYTES``."""
        self.stopping.set()
        self.thread.join()
        os.set_blocking(self.fd, False)
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            self._take(chunk)
        os.close(self.fd)
        if self.size > VERDICT_BYTES:
            return None
        return {"text": b"".join(self.chunks).decode("utf-8", "replace"), "writes": len(self.chunks)}


def collect():
    """Print ``{name: Channel.result()}`` for every channel, as one JSON line."""
    written = {name: channel.result() for name, channel in CHANNELS.items()}
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
