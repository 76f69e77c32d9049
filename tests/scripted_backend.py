"""A backend whose launches and deaths a test scripts, around the real agent.

Each sandbox is the real agent as a plain child process on a pipe (the process backend: no
namespaces, no bubblewrap, no daemon, so any Linux machine runs it, in about 60 ms a launch).
What the test controls is everything around it: the next launches can fail, or wait for an
event the test sets; any box can crash (its agent is SIGKILLed, as an OOM kill or a dead
daemon would end it); and every box records how often it was killed, so a test can prove that
each box the pool made was killed exactly once and none was left running.
"""

from __future__ import annotations

import os
import signal
from collections import deque

import anyio

from gem_sandbox.sandbox.backends.base import Backend, Box, SandboxSpec
from gem_sandbox.sandbox.backends.local import ProcessBackend, ProcessBox

Step = BaseException | anyio.Event  # raise it, or wait for it before launching


class ScriptedBox(Box):
    def __init__(self, inner: ProcessBox) -> None:
        self.inner = inner
        self.id = inner.id
        self.stream = inner.stream
        self.kills = 0

    @property
    def running(self) -> bool:
        return self.inner.process.returncode is None

    async def kill(self) -> None:
        self.kills += 1
        await self.inner.kill()

    def crash(self) -> None:
        """The agent dies now, without its owner asking (its stream then ends)."""
        os.kill(self.inner.process.pid, signal.SIGKILL)


class ScriptedBackend(Backend):
    name = "scripted"

    def __init__(self) -> None:
        self.inner = ProcessBackend()
        self.plan: deque[Step] = deque()  # consumed one per launch; empty: launch normally
        self.boxes: list[ScriptedBox] = []
        self.launches = 0

    @classmethod
    def check(cls) -> str | None:
        return ProcessBackend.check()

    async def launch(self, spec: SandboxSpec) -> Box:
        self.launches += 1
        step = self.plan.popleft() if self.plan else None
        if isinstance(step, anyio.Event):
            await step.wait()
        elif step is not None:
            raise step
        box = ScriptedBox(await self.inner.launch(spec))  # type: ignore[arg-type]
        self.boxes.append(box)
        return box

    def fail_next(self, count: int, error: BaseException | None = None) -> None:
        self.plan.extend([error or OSError("the daemon went away")] * count)

    @property
    def running(self) -> list[ScriptedBox]:
        """Boxes whose agent process is still there."""
        return [box for box in self.boxes if box.running]
