"""GEM's terminal env on gem-sandbox: a task's instruction, a shell in a Docker sandbox, and the
task's tests after the episode, outside the model's control.

An episode leases a sandbox, runs the task's setup in its work dir (``/app``) and returns the
instruction. Each action is GEM's: ``<bash>command</bash>`` (or GEM's YAML ``<bash>cmd:
...</bash>``) runs in one persistent bash session through the shell tool and returns its
output; ``<finish>...</finish>`` ends the episode, and so does an action with neither, the
``max_failed_commands``-th failing command, ``max_turns`` or the task's agent timeout. Then
the tests run (:mod:`.verifier`) and give the reward: the (``test_weights``-weighted) fraction
of Terminal-Bench tests passed (``reward="all"``: 1.0 only when all pass), or Harbor's reward.

``info`` carries the outcome as the code envs do: ``status`` (``ok``, ``wrong_answer``,
``error``, ``timeout``, ``oom``, ``infra_error``: the sandbox failed, mask the sample),
``passed``, ``total``, ``detail``, plus ``task``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread

from gem_sandbox.core import Env, ResetReturn, StepReturn
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import BackendNotAvailable, SandboxCrashed, SandboxError, SandboxUnavailable
from gem_sandbox.sandbox.result import Status
from gem_sandbox.sync import SyncRuntime, resolve_runtime
from gem_sandbox.tools.base import ToolCall
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.shell import ShellTool
from gem_sandbox_envs.code.base import TERMINAL_STATE
from gem_sandbox_envs.code.outcome import Category, Outcome
from gem_sandbox_envs.code.tasks import TaskCycle

from . import images, verifier
from .tasks import StrPath, TerminalTask, load_tasks, shipped_tasks

REWARDS = ("fraction", "all")
SETUP_TIMEOUT = 120.0
_ACTION = re.compile(r"<(bash|finish)>(.*?)</\1>|<finish\s*/>", re.DOTALL)
_SOLUTION_END = "END_OF_REFERENCE_SOLUTION"


class TerminalUnavailable(SandboxError, RuntimeError):
    """Terminal tasks need the project's Docker image (its ``/app``, ``/tests`` and ``/logs``)
    and a uid per run; this sandbox has not got them."""


class TaskSetupFailed(RuntimeError):
    """The task's setup script failed: a broken task, not something to score."""


def solution_action(task: TerminalTask) -> str:
    """The action that runs ``task``'s reference solution from a file, as Terminal-Bench's and
    Harbor's oracle agents do."""
    if task.solution is None:
        raise ValueError(f"task {task.name} ships no reference solution")
    return (
        f"<bash>cat > /tmp/solution.sh <<'{_SOLUTION_END}'\n{task.solution.rstrip()}\n{_SOLUTION_END}\n"
        "bash /tmp/solution.sh</bash>"
    )


class TerminalEnv(Env[str, str]):
    """Serves ``tasks`` (a directory of tasks or of one task; default: the shipped ones), each
    once per epoch in a seeded order; ``task=`` fixes one by name."""

    blocking = False

    def __init__(
        self,
        tasks: StrPath | Sequence[TerminalTask] | None = None,
        task: str | None = None,
        max_turns: int = 30,
        max_failed_commands: int = 5,
        command_timeout: float = 60.0,
        reward: str = "fraction",
        runtime: Runtime | SyncRuntime | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(seed)
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        loaded = shipped_tasks() if tasks is None else load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks)
        if task is not None:
            loaded = [t for t in loaded if t.name == task]
            if not loaded:
                raise ValueError(f"no task named {task!r}")
        self.cycle = TaskCycle(loaded, seed)
        self.max_turns = max_turns
        self.max_failed_commands = max_failed_commands
        self.command_timeout = command_timeout
        self.reward = reward
        self.runtime = runtime
        self.shell: ShellTool | None = None  # on the episode's runtime
        self.episode: Episode | None = None
        self.episode_runtime: Runtime | None = None
        self.task_runtimes: dict[str, Runtime] = {}  # image tag -> this env's runtime on it
        self.task: TerminalTask | None = None
        self.turns = 0
        self.failed_commands = 0
        self.deadline = 0.0

    @classmethod
    def describe_source(cls, tasks: StrPath | None = None, task: str | None = None, **_: Any) -> str:
        where = "shipped" if tasks is None else f"local ({tasks})"
        return f"{where} task {task}" if task else f"{where} tasks"

    async def areset(self, seed: int | None = None, **kwargs: Any) -> ResetReturn:
        self.seed_rng(seed)
        await self._end_episode()
        task: TerminalTask = self.cycle.draw(self.rng) if seed is not None else self.cycle.next()  # type: ignore[assignment]
        self.task, self.turns, self.failed_commands = task, 0, 0
        runtime = self.episode_runtime = await self._runtime_for(task)
        self.shell = ShellTool(timeout=self.command_timeout, runtime=runtime, max_output_chars=8000)
        self.episode = Episode()
        try:
            await self._set_up(task, await self.episode.sandbox(runtime))
        except BaseException:
            await self._end_episode()
            raise
        self.deadline = time.monotonic() + task.agent_timeout
        return task.instruction, {"task": task.name}

    async def _set_up(self, task: TerminalTask, sandbox: Sandbox) -> None:
        _check_sandbox(sandbox)
        setup = images.COPY_APP if task.own_image else task.setup
        if setup is not None:
            result = await sandbox.run(setup, language="bash", timeout=SETUP_TIMEOUT)
            if result.status is not Status.OK:
                raise TaskSetupFailed(f"task {task.name}'s setup ended {result.status.value}: {result.stderr[-500:]}")

    async def _runtime_for(self, task: TerminalTask) -> Runtime:
        """The caller's runtime, or for a task with its own image this env's runtime on that
        image (built first; with the caller's pool settings)."""
        runtime = await resolve_runtime(self.runtime)
        if not task.own_image:
            return runtime
        tag = await anyio.to_thread.run_sync(images.build_task_image, task)
        if tag not in self.task_runtimes:
            self.task_runtimes[tag] = await Runtime("docker", runtime.config, image=tag).__aenter__()
        return self.task_runtimes[tag]

    async def astep(self, action: str) -> StepReturn:
        assert self.task is not None and self.episode is not None and self.shell is not None
        self.turns += 1
        match = _ACTION.search(action)
        if match is None or match.group(1) != "bash":
            note = None if match is not None else "no <bash> or <finish> action"
            return await self._finish(note)
        call = ToolCall("bash", {"command": _command(match.group(2))}, match.group(0), match.end())
        result = await self.shell.aexecute(call, self.episode)
        status = result.details.get("status")
        if status == Category.INFRA_ERROR.value:
            return await self._finish("the sandbox failed mid-episode", infra_error=result.observation)
        self.failed_commands += result.error
        observation = f"<bash_output>{result.observation}</bash_output>"
        if self.failed_commands >= self.max_failed_commands:
            return await self._finish(f"{self.failed_commands} commands failed")
        if self.turns >= self.max_turns or time.monotonic() >= self.deadline:
            return await self._finish("out of turns or time", truncated=True)
        return observation, 0.0, False, False, {"task": self.task.name}

    async def _finish(self, note: str | None, *, truncated: bool = False, infra_error: str | None = None) -> StepReturn:
        """End the episode: score the work dir (unless the sandbox failed), give it back."""
        assert self.task is not None and self.episode is not None
        task = self.task
        try:
            verdict = (
                verifier.Verdict(0.0, Outcome(Category.INFRA_ERROR, 0, 0, detail=infra_error))
                if infra_error is not None
                else await self._verify(task)
            )
        finally:
            await self._end_episode()
        info = {**verdict.outcome.info(), "task": task.name, "turns": self.turns}
        if note:
            info["ended_by"] = note
        return TERMINAL_STATE, verdict.reward, True, truncated, info

    async def _verify(self, task: TerminalTask) -> verifier.Verdict:
        assert self.episode is not None and self.episode_runtime is not None
        runtime = self.episode_runtime
        try:
            product = await verifier.work_product(await self.episode.sandbox(runtime))
            return await verifier.verify(runtime, task, product, self.reward)
        except verifier.WorkProductError as exc:
            return verifier.Verdict(0.0, Outcome(Category.ERROR, 0, 0, detail=str(exc)))
        except (BackendNotAvailable, verifier.VerifierUnavailable):
            raise
        except (SandboxUnavailable, SandboxCrashed, SandboxError) as exc:
            return verifier.Verdict(0.0, Outcome(Category.INFRA_ERROR, 0, 0, detail=str(exc)))

    async def _end_episode(self) -> None:
        if self.episode is not None:
            episode, self.episode = self.episode, None
            await episode.release()

    async def aclose(self) -> None:
        await self._end_episode()
        runtimes, self.task_runtimes = list(self.task_runtimes.values()), {}
        for runtime in runtimes:
            await runtime.__aexit__(None, None, None)

    def sample_random_action(self) -> str:
        return self.rng.choice(["<bash>ls -la</bash>", "<bash>pwd</bash>", "<finish>done</finish>"])

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError("a terminal episode lives in a sandbox and cannot be copied")


def _command(content: str) -> str:
    """GEM's actions carry YAML (``cmd: ls``); a plain command is taken as it is."""
    text = content.strip("\n")
    try:
        import yaml
    except ModuleNotFoundError:
        return text
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:  # not YAML at all: a plain command
        return text
    if isinstance(parsed, dict) and isinstance(parsed.get("cmd"), str):
        return str(parsed["cmd"])
    return text


def _check_sandbox(sandbox: Sandbox) -> None:
    if sandbox.backend != "docker" or sandbox.hello.get("isolation") != "uid":
        raise TerminalUnavailable(
            f"terminal tasks run on Docker (the project image's /app, /tests and /logs, a uid per run); "
            f"sandbox {sandbox.id} is {sandbox.backend}"
        )
