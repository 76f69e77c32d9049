"""A shell tool: ``<bash>...</bash>`` runs in one persistent bash session per episode.

The session lives on the sandbox the episode leased (the one a stateful Python tool of the
same runtime uses too, so files are shared), so ``cd``, exported variables and files carry over
from one call to the next until the episode ends.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools.base import ToolCall, one_string_argument
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.sandboxed import DEFAULT_MAX_OUTPUT_CHARS, SandboxTool, cap, in_episode, status_note

_PATTERN = re.compile(r"<bash>(.*?)</bash>", re.DOTALL)
SESSION = "episode"


class ShellTool(SandboxTool):
    """Runs commands in the episode's bash session; each call waits at most ``timeout`` s."""

    name: ClassVar[str] = "bash"
    tool_type: ClassVar[str] = "shell"
    description: ClassVar[str] = (
        "Run a bash command in a persistent shell session (working directory, exported variables "
        "and files persist); returns its output and exit code."
    )
    parameters: ClassVar[dict[str, Any]] = one_string_argument("command", "e.g. ls -la && cat notes.txt")

    def __init__(
        self,
        timeout: float = 10,
        *,
        runtime: Runtime | SyncRuntime | None = None,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        super().__init__(timeout, runtime=runtime, max_output_chars=max_output_chars)

    def instruction_string(self) -> str:
        return (
            "You can run shell commands by writing them within <bash>...</bash> tags. They run in one "
            "persistent bash session: the working directory, exported variables and files are kept between "
            'commands. The output and exit code are returned after "Shell result". '
            "Return your final answer within \\boxed{}."
        )

    def parse(self, action: str) -> ToolCall | None:
        match = _PATTERN.search(action)
        if match is None:
            return None
        return ToolCall(self.name, {"command": match.group(1).strip("\n")}, action[: match.end()], match.end())

    async def run(self, runtime: Runtime, episode: Episode | None, call: ToolCall) -> ExecResult:
        command = str(call.arguments["command"])
        return await in_episode(
            runtime, episode, lambda sandbox: sandbox.shell(command, session=SESSION, timeout=self.timeout)
        )

    def observation(self, result: ExecResult) -> str:
        """``Shell result (exit code N):`` then stdout and stderr as the terminal showed them;
        a run that did not simply exit says how it ended instead of the exit code."""
        note = status_note(result, self.timeout)
        if result.status is Status.INFRA_ERROR:
            return f"Shell result (sandbox failure):\n{note}\n"
        header = "timed out" if result.status is Status.TIMEOUT else f"exit code {result.exit_code}"
        lines = [text.rstrip("\n") for text in (result.stdout, result.stderr, note) if text and text.strip("\n")]
        body = cap("\n".join(lines), self.max_output_chars)
        return f"Shell result ({header}):\n{body}\n" if body else f"Shell result ({header}):\n"
