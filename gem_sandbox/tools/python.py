"""GEM's Python tool, run in a real sandbox: ``<python>...</python>`` or a ```` ```python ``` ````
block in, ``Code execution result: ...`` out.

Parsing, the instruction string and the observation follow GEM's ``PythonCodeTool`` exactly.
What differs is where and how the code runs: in a pooled sandbox instead of a host subprocess
behind a substring blacklist, with the timeout really applied, output bounded (head and tail
kept, the cut marked) and decoded leniently, and no silent re-run with extra imports.

Two modes:

* stateless (default, GEM's semantics): every block is a complete script, run on any warm
  sandbox of the pool and forgotten;
* ``stateful=True``: every block runs in one persistent Python namespace per episode, a kernel
  on the sandbox the episode leased, so variables, functions and imports carry over.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools.base import ToolCall
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.sandboxed import DEFAULT_MAX_OUTPUT_CHARS, SandboxTool, cap, in_episode, status_note

# GEM's two block forms; each is searched once and the block that ends first wins.
_PATTERNS = (re.compile(r"<python>(.*?)</python>", re.DOTALL), re.compile(r"```\n?python(.*?)```", re.DOTALL))

# GEM's sandbox_type values: "none" (a bare host subprocess there) and "bwrap".
GEM_SANDBOX_TYPES = ("none", "bwrap")

OBSERVATION_PREFIX = "Code execution result: "

_INTRODUCTION = (
    "Solve the above problem step by step. You now have the ability to selectively write "
    "executable Python code to enhance your reasoning process. "
    "The Python code will be executed by an external sandbox, "
    'and the output (after "Code execution result: ") is returned to aid your reasoning '
    "and help you arrive at the final answer. "
)
GEM_INSTRUCTION = (
    _INTRODUCTION + "The Python code should be complete scripts, including necessary imports, "
    "wrapped within <python>...</python> tags or using ```python...``` code block. "
    "Return your final answer within \\boxed{}."
)
STATEFUL_INSTRUCTION = (
    _INTRODUCTION + "Your code runs in one persistent Python session: variables, functions and imports "
    "from earlier code are still defined. "
    "Wrap the code within <python>...</python> tags or use a ```python...``` code block. "
    "Return your final answer within \\boxed{}."
)


class PythonCodeTool(SandboxTool):
    """GEM's ``PythonCodeTool(timeout, sandbox_type, keep_error_last_line)``, sandboxed.

    ``keep_error_last_line`` shows only the last line of stderr (usually the exception).
    ``sandbox_type`` is accepted for GEM's signature and does not route anything: every run
    is isolated, on ``runtime``'s backend. ``max_output_chars`` bounds the observation.
    """

    name: ClassVar[str] = "python"
    tool_type: ClassVar[str] = "python_code"
    description: ClassVar[str] = "Run Python code in a sandbox and return what it prints (stdout, then stderr)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source, e.g. print(2**10)"}},
        "required": ["code"],
    }

    def __init__(
        self,
        timeout: float = 5,
        sandbox_type: str = "none",
        keep_error_last_line: bool = False,
        *,
        stateful: bool = False,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        runtime: Runtime | SyncRuntime | None = None,
    ) -> None:
        if sandbox_type not in GEM_SANDBOX_TYPES:
            raise ValueError(
                f"unknown sandbox_type {sandbox_type!r}; GEM's are {', '.join(GEM_SANDBOX_TYPES)} "
                "(choose the backend with runtime=Runtime(backend=...))"
            )
        super().__init__(timeout, runtime=runtime, max_output_chars=max_output_chars)
        self.sandbox_type = sandbox_type
        self.keep_error_last_line = keep_error_last_line
        self.stateful = stateful

    def instruction_string(self) -> str:
        return STATEFUL_INSTRUCTION if self.stateful else GEM_INSTRUCTION

    def parse(self, action: str) -> ToolCall | None:
        matches = [m for pattern in _PATTERNS if (m := pattern.search(action))]
        if not matches:
            return None
        first = min(matches, key=lambda m: m.end())
        return ToolCall(self.name, {"code": first.group(1).strip()}, action[: first.end()], first.end())

    async def run(self, runtime: Runtime, episode: Episode | None, call: ToolCall) -> ExecResult:
        code = str(call.arguments["code"])
        if self.stateful:
            return await in_episode(runtime, episode, lambda sandbox: sandbox.kernel_exec(code, timeout=self.timeout))
        return await runtime.run(code, "python", timeout=self.timeout)

    def observation(self, result: ExecResult) -> str:
        """GEM's: stdout, then stderr on a new line when there is any, left-stripped, after
        ``Code execution result: `` and before a newline. How a run ended abnormally is said
        where the error would be."""
        stdout, stderr = result.stdout, result.stderr.strip()
        note = status_note(result, self.timeout)
        if note is not None:  # a timeout's traceback is only the interrupt: the note replaces it
            keep = stderr and result.status not in (Status.TIMEOUT, Status.INFRA_ERROR)
            stderr = f"{stderr}\n{note}" if keep else note
        if stderr and self.keep_error_last_line:
            stderr = stderr.split("\n")[-1]
        text = f"{stdout}\n{stderr}" if stderr else stdout
        return OBSERVATION_PREFIX + cap(text.lstrip(" \n"), self.max_output_chars) + "\n"
