"""The agent's main loop: frames in on stdin, one task per request, frames out on stdout.

Requests run concurrently (a long ``run`` never holds up a ``ping``), each answered with
exactly one response. The agent stops on ``shutdown``, SIGTERM (unless it is pid 1) or the
end of its stream (the host is gone); either way every user process is killed before it
exits.
"""

import gc
import os
import signal
import sys
import time

from . import aio, files, languages, linux, log, netns, protocol
from .cgroup import OomCounter
from .children import Reaper
from .kernels import Kernels
from .pipes import PipeReader, PipeWriter
from .protocol import Refused
from .runs import Runner
from .shells import Shells
from .snapshots import Snapshots
from .sweeper import Sweeper
from .tenants import Tenants, snapshot
from .workspace import RUN_PATH, Workspace
from .zygote import DirectForker

FEATURES = ["run", "kernel", "shell", "files", "reset", "stats", "spawn", "snapshot"]
FLUSH_PATIENCE = 2.0  # seconds to get the last responses out at shutdown
TRIM_SLACK_KB = 4096  # growth over the idle size that a reset gives back to the kernel
SOCKET_PATIENCE = 0.5  # seconds a reset waits for the sockets of killed processes to close
# Seconds a reset may take (the host waits 10 by default): past them it answers reset_failed,
# and the host retires the sandbox, rather than leaving the host to declare the agent dead.
RESET_PATIENCE = 8.0


class Agent:
    """The operations, over the parts that do the work."""

    def __init__(self, config, loop, send, zygote=None):
        self.send = send
        self.started = time.monotonic()
        self.idle_rss_kb = 0  # set once serving: what a reset trims the agent back towards
        self.stopping = aio.Event()
        self.reaper = Reaper(loop)
        self.own_network = netns.own_namespace()  # see netns: only then are sockets counted
        if self.own_network:
            netns.disable_time_wait()
        self.tenants = Tenants(config, self.reaper)
        if zygote is None:
            self.forker = DirectForker(self.reaper, self.tenants)
        else:
            zygote.attach(loop, self.reaper, self.tenants, self.fail)
            self.forker = zygote
        self.workspace = Workspace(config, self.tenants.gid, Sweeper(loop, self.reaper, self.tenants))
        self.workspace.prepare()
        programs = languages.find_programs(RUN_PATH)
        oom = OomCounter(config.oom_counter)
        parts = (loop, config, self.forker, self.tenants, self.workspace, oom)
        self.runner = Runner(*parts, programs)
        self.kernels = Kernels(*parts)
        self.shells = Shells(*parts, programs.get("bash"))
        self.snapshots = Snapshots(self.kernels, self.shells, self.tenants, self.workspace)
        self.ops = {
            "ping": self.ping,
            "run": self.run,
            "spawn": self.spawn,
            "process_input": self.process_input,
            "process_signal": self.process_signal,
            "process_resize": self.process_resize,
            "kernel_exec": self.kernel_exec,
            "kernel_restart": self.kernel_restart,
            "shell": self.shell,
            "shell_close": self.shell_close,
            "write_files": self.write_files,
            "read_files": self.read_files,
            "snapshot": self.snapshot,
            "restore": self.restore,
            "reset": self.reset,
            "stats": self.stats,
            "shutdown": self.shutdown,
        }

    def hello(self):
        return {
            "id": 0,
            "op": "hello",
            "version": protocol.VERSION,
            "pid": os.getpid(),
            "python": "%d.%d.%d" % sys.version_info[:3],
            "languages": self.runner.languages,
            "features": FEATURES,
            "isolation": self.tenants.isolation,
            "workdir": self.workspace.workdir,
            "tmpdir": self.workspace.tmpdir,
        }

    def fail(self, reason):
        """The agent cannot go on (its fork server died): stop, so the host sees the sandbox
        die and reports the runs in flight as ``infra_error``."""
        log.error("%s; stopping", reason)
        self.stopping.set()

    async def handle(self, header, payload):
        request_id = header["id"]
        try:
            op = self.ops.get(header.get("op"))
            if op is None:
                raise Refused("unknown_op", "no operation %r" % header.get("op"))
            fields, out = await op(header, payload)
            reply = dict(fields, id=request_id, ok=True)
        except Refused as exc:
            reply, out = {"id": request_id, "ok": False, "error": exc.error()}, b""
        except Exception as exc:
            log.exception("%s failed", header.get("op"))
            error = {"type": "internal", "message": "%s: %s" % (type(exc).__name__, exc)}
            reply, out = {"id": request_id, "ok": False, "error": error}, b""
        self.send(reply, out)

    async def ping(self, header, payload):
        return {}, b""

    async def run(self, header, payload):
        """A run; a ``stateless`` one also reports whether the sandbox is now ``clean`` (as
        a verified reset would leave it), so the host can skip the reset."""
        fields, out = await self.runner.run(header, payload)
        if header.get("stateless"):
            busy = self.tenants.busy() or self.kernels.names() or self.shells.names()
            fields["clean"] = not busy and not self._leftovers()
            if fields["clean"]:
                self._trim()
        return fields, out

    async def spawn(self, header, payload):
        return await self.runner.spawn(header, payload, self.send)

    async def process_input(self, header, payload):
        self.runner.process(header).write(payload, bool(header.get("eof")))
        return {}, b""

    async def process_signal(self, header, payload):
        signum = header.get("signal")
        if signum not in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGHUP):
            raise Refused("bad_request", "signal must be SIGINT, SIGTERM, SIGKILL or SIGHUP's number")
        await self.runner.process(header).signal(signum)
        return {}, b""

    async def process_resize(self, header, payload):
        rows, cols = header.get("rows"), header.get("cols")
        if not all(isinstance(n, int) and 0 < n < 1 << 16 for n in (rows, cols)):
            raise Refused("bad_request", "rows and cols must be positive integers")
        self.runner.process(header).resize(rows, cols)
        return {}, b""

    async def kernel_exec(self, header, payload):
        """With ``stream``, its output also goes out as it is written, as a spawned
        program's does (``output`` events with the request's id)."""
        echo = None
        if header.get("stream"):
            request_id = header["id"]

            def echo(fd, data):
                self.send({"id": request_id, "event": "output", "fd": fd}, data)

        return await self.kernels.execute(
            header.get("kernel", "default"), header.get("code"), header, echo
        )

    async def kernel_restart(self, header, payload):
        await self.kernels.stop(header.get("kernel", "default"))
        return {}, b""

    async def shell(self, header, payload):
        if self.shells.bash is None:
            raise Refused("unsupported_language", "this sandbox has no bash")
        return await self.shells.execute(
            header.get("session", "default"), header.get("command"), header
        )

    async def shell_close(self, header, payload):
        await self.shells.stop(header.get("session", "default"))
        return {}, b""

    async def write_files(self, header, payload):
        written = files.write_tar(
            self.workspace.workdir, header.get("dest", "."), payload, self.tenants.gid, header.get("xattrs")
        )
        return {"written": written}, b""

    async def read_files(self, header, payload):
        paths = header.get("paths")
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise Refused("bad_request", "paths must be a list of strings")
        missing, tar = files.read_tar(self.workspace.workdir, paths)
        return {"missing": missing}, tar

    async def snapshot(self, header, payload):
        """The sandbox's files, kernels and shells as one tar stream (see snapshots)."""
        manifest, data = await self.snapshots.take()
        return {"manifest": manifest}, data

    async def restore(self, header, payload):
        """A clean sandbox takes the state of a stream :meth:`snapshot` made."""
        return {"manifest": await self.snapshots.restore(payload)}, b""

    async def reset(self, header, payload):
        """Kill every user process, drop kernels and shells, empty the dirs, then check."""
        loop = aio.get_running_loop()
        deadline = loop.time() + RESET_PATIENCE
        self.runner.generation += 1
        killed = await self.tenants.kill_all()
        self.kernels.forget_all()
        self.shells.forget_all()
        self.tenants.recover()
        try:
            await self.workspace.clear(max(0.0, deadline - SOCKET_PATIENCE - loop.time()))
        except OSError as exc:
            raise Refused(
                "reset_failed", "emptying the work and tmp dirs failed: %s" % exc
            ) from None
        self.reaper.reap()  # what the last kill left as zombies is gone before the answer
        await self._sockets_closed()
        problems = self._leftovers()
        if problems:
            raise Refused("reset_failed", "; ".join(problems))
        self._trim()
        return {"killed": killed}, b""

    def _leftovers(self):
        """What a tenant left that the next one could see: user processes, files in the
        work and tmp dirs, System V IPC objects."""
        problems = []
        strays = self.tenants.strays()
        if strays:
            problems.append("user processes %s survived" % sorted(strays))
        if self.workspace.sweeper.busy:
            problems.append("files of a run are still being removed")
        left = self.workspace.leftovers()
        if left:
            problems.append("%s not empty" % ", ".join(left))
        if self.tenants.ipc_left():
            problems.append("System V IPC objects survived")
        if self.own_network and netns.sockets():
            problems.append("%d TCP/UDP sockets survived (TIME_WAIT?)" % netns.sockets())
        return problems

    async def _sockets_closed(self):
        """The kernel closes the sockets of killed processes as it tears them down: give it
        a moment."""
        loop = aio.get_running_loop()
        deadline = loop.time() + SOCKET_PATIENCE
        while self.own_network and netns.sockets() and loop.time() < deadline:
            await aio.sleep(0.01)

    def _trim(self):
        if _rss_kb() > self.idle_rss_kb + TRIM_SLACK_KB:  # collecting costs ~5 ms: when due
            gc.collect()
            linux.release_free_memory()

    async def stats(self, header, payload):
        return {
            "processes": len(self.tenants.strays(snapshot())),
            "kernels": self.kernels.names(),
            "shells": self.shells.names(),
            "runs_total": self.runner.runs_total,
            "rss_kb": _rss_kb(),
            "uptime_s": round(time.monotonic() - self.started, 3),
        }, b""

    async def shutdown(self, header, payload):
        aio.get_running_loop().call_soon(self.stopping.set)  # after this reply is sent
        return {}, b""


async def serve(config, zygote=None):
    """Serve until told to stop; runs are forked by ``zygote`` when given (uid mode)."""
    loop = aio.get_running_loop()
    os.umask(0o002)
    linux.set_not_dumpable()
    linux.set_child_subreaper()
    linux.limit_malloc_arenas(2)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # not KeyboardInterrupt: the host stops it
    proto_in, proto_out = _claim_stdio(config.stream_fd)
    writer = PipeWriter(loop, proto_out)
    text = protocol.Base64Lines() if config.base64 else None

    def send(header, payload=b""):
        try:
            frame = protocol.encode(header, payload)
        except protocol.FrameError as exc:
            error = {"type": "file_error", "message": "the response is too large: %s" % exc}
            frame = protocol.encode({"id": header["id"], "ok": False, "error": error})
        writer.write(text.encode(frame) if text else frame)

    agent = Agent(config, loop, send, zygote)
    tasks = set()
    frames = protocol.FrameDecoder()

    def on_data(data):
        try:
            frames.feed(text.decode(data) if text else data)
            frame = frames.next_frame()
            while frame is not None:
                task = loop.create_task(agent.handle(*frame))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                frame = frames.next_frame()
        except protocol.FrameError as exc:
            log.error("bad frame from the host, stopping: %s", exc)
            agent.stopping.set()

    reader = PipeReader(loop, proto_in, on_data)
    # As pid 1 of its sandbox (rootless bubblewrap, where runs share its uid) the kernel
    # drops every signal from inside the sandbox that the agent has no handler for, SIGKILL
    # and SIGSTOP included: so it installs none that a run could use to stop it. The host
    # stops it by closing the stream or from outside.
    if os.getpid() != 1:
        loop.add_signal_handler(signal.SIGTERM, agent.stopping.set)
    send(agent.hello())
    gc.collect()  # what starting up left behind goes back to the kernel before idling
    linux.release_free_memory()
    agent.idle_rss_kb = _rss_kb()
    agent.runner.prepare_spare()
    stopping = loop.create_task(agent.stopping.wait())
    await aio.wait([reader.eof, stopping], return_when=aio.FIRST_COMPLETED)
    stopping.cancel()
    reader.close()
    for task in list(tasks):
        task.cancel()
    if tasks:
        await aio.wait(list(tasks), timeout=FLUSH_PATIENCE)
    agent.runner.discard_spare()
    await agent.tenants.kill_all()
    agent.workspace.sweeper.stop()
    agent.forker.close()
    deadline = loop.time() + FLUSH_PATIENCE
    while writer.buffer and not writer.closed and loop.time() < deadline:
        await aio.sleep(0.01)


def _claim_stdio(stream_fd=None):
    """Take stdin and stdout (or the socket ``stream_fd``) for the protocol and point fds 0
    and 1 elsewhere, so nothing the agent or a library prints can corrupt the frame
    stream."""
    if stream_fd is None:
        proto_in, proto_out = os.dup(0), os.dup(1)
    else:
        proto_in, proto_out = stream_fd, os.dup(stream_fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    return proto_in, proto_out


def _rss_kb():
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1])
    return 0
