"""GEM's ``gem.tools.python_code_tool``: the Python tool, run in a real sandbox: ``<python>...</python>`` or a ```` ```python ``` ````
block in, ``Code execution result: ...`` out.

What the model sees and what it is paid follow gem-llm 0.1.0's ``PythonCodeTool`` and its
``run_python``: the block GEM extracts (the one that ends first), GEM's answer to a bare
``...`` (a ``SyntaxError``, without running it), GEM's re-run of code that failed with
``is not defined`` with GEM's standard imports prepended (:func:`run_like_gem`, both runs in
the sandbox), GEM's timeout observation (what the program printed before is dropped) and
GEM's ``Code execution result: `` format. What differs is where and how the code runs, where
GEM is unsafe or broken: in a pooled sandbox instead of a host subprocess behind a substring
blacklist, with the timeout really applied (GEM always waits 10 s, whatever ``timeout`` says),
output bounded by the runtime's ``max_output_bytes`` (head and tail kept, the cut marked) and
decoded leniently (GEM raises on bytes that are not UTF-8), and no host paths in tracebacks.

Two modes:

* stateless (default, GEM's semantics): every block is a complete script, run on any warm
  sandbox of the pool and forgotten;
* ``stateful=True`` (an extension): every block runs in one persistent Python namespace per
  episode, a kernel on the sandbox the episode leased, so variables, functions and imports
  carry over. Its cells are plain Python: no re-run, no special case for ``...``.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.result import ExecResult, Status
from gem_sandbox.sync import SyncRuntime
from gem_sandbox.tools.base import ToolCall, one_string_argument
from gem_sandbox.tools.episode import Episode
from gem_sandbox.tools.sandboxed import SandboxTool, cap, in_episode, status_note

# GEM's two block forms; each is searched once and the block that ends first wins.
_PATTERNS = (re.compile(r"<python>(.*?)</python>", re.DOTALL), re.compile(r"```\n?python(.*?)```", re.DOTALL))

# GEM's sandbox_type values: "none" (a bare host subprocess there) and "bwrap".
GEM_SANDBOX_TYPES = ("none", "bwrap")

OBSERVATION_PREFIX = "Code execution result: "

#: Code GEM answers without running it (``gem.utils.sandbox.subprocess_run``), and its answer.
ELLIPSIS_CODE = "..."
ELLIPSIS_ERROR = "SyntaxError: invalid syntax"

#: What in a failed run's stderr makes GEM run the code again with :data:`STANDARD_IMPORTS`.
RERUN_TRIGGER = "is not defined"

#: ``gem.utils.constants.BASE_IMPORTS`` of gem-llm 0.1.0, line for line, except that the two
#: third-party imports (numpy, pandas) are skipped where the sandbox has no such module instead
#: of failing the whole re-run; every line is still one line, so a traceback of the re-run
#: names the line GEM's would (the code's own line ``n`` is line ``n + 36``).
# fmt: off
STANDARD_IMPORTS = """from itertools import accumulate, chain, combinations, count, permutations, product, groupby, islice, repeat
from copy import deepcopy
from string import ascii_lowercase, ascii_uppercase
from math import floor, log2, log10, sqrt, comb, gcd, ceil, inf, isqrt, factorial, atan2, pi
from collections import defaultdict, deque, Counter
from bisect import bisect, bisect_left, bisect_right, insort
from heapq import heappush, heappop, heapify, merge, nlargest, nsmallest, heapreplace
from functools import reduce, cache, lru_cache, cmp_to_key, reduce
from random import randrange, shuffle
from operator import itemgetter, sub, xor, or_
from re import search as re_search  # Assuming 're' refers to a regex search
from os.path import commonprefix
from typing import List, Tuple, Dict, Set, Optional, Union, Any, Callable, Iterable, Iterator, Generator, Deque
import copy
import string
import math
import collections
import bisect
import heapq
import functools
import random
import itertools
import operator
import re
import datetime
from time import time
if __import__("importlib.util").util.find_spec("numpy"): import numpy as np
if __import__("importlib.util").util.find_spec("pandas"): import pandas as pd
from math import log, prod  # 'log' and 'prod' are functions in the math module
from collections import deque, defaultdict, Counter, OrderedDict
from itertools import accumulate, permutations, combinations, product, groupby, islice, chain, repeat, zip_longest, cycle, pairwise
from functools import lru_cache, reduce, partial
from operator import iand
import sys
import io, os
"""
# fmt: on

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


def needs_standard_imports(result: ExecResult) -> bool:
    """GEM's trigger for the re-run: the run finished (no timeout, GEM's re-run is skipped by
    its ``TimeoutExpired``), exited non-zero and said ``is not defined`` on stderr."""
    if result.status in (Status.TIMEOUT, Status.INFRA_ERROR):
        return False
    return result.exit_code != 0 and RERUN_TRIGGER in result.stderr


async def run_like_gem(
    runtime: Runtime,
    code: str,
    *,
    stdin: str | bytes | None = None,
    timeout: float | None = None,
    limits: RunLimits | None = None,
    standard_imports: bool = True,
) -> ExecResult:
    """``code`` as gem-llm's ``run_python`` runs it, in sandboxes of ``runtime``: ``...`` is a
    ``SyntaxError`` without a run; code whose run fails with ``is not defined`` runs again (on
    a fresh sandbox, as GEM's re-run starts a fresh process) with :data:`STANDARD_IMPORTS`
    prepended, and that run's result is the answer. Each run gets ``timeout`` and ``limits``
    (None: the runtime's)."""
    if code == ELLIPSIS_CODE:
        return ExecResult(Status.ERROR, exit_code=1, stderr=ELLIPSIS_ERROR)
    result = await runtime.run(code, "python", stdin=stdin, timeout=timeout, limits=limits)
    if standard_imports and needs_standard_imports(result):
        rerun = STANDARD_IMPORTS + "\n" + code
        result = await runtime.run(rerun, "python", stdin=stdin, timeout=timeout, limits=limits)
    return result


def as_gem_answer(result: ExecResult, timeout: float, *, kill_note: bool = False) -> tuple[bool, str, str]:
    """A run's result in GEM's words, as gem-llm's ``run_python`` returns it: ``(success, stdout,
    stderr)``, stderr stripped. A timeout is GEM's message alone, with no output. Where GEM has
    nothing to say, ours goes where the error would: the sandbox's own failure (``infra_error``,
    instead of the output), running out of memory, and with ``kill_note`` a kill. The one place
    that words a run for GEM: the Python tool's observation and GEM's ``run_python`` both say it."""
    note = status_note(result, timeout)
    if result.status is Status.TIMEOUT:
        return False, "", f"\n{note}"
    if result.status is Status.INFRA_ERROR:
        return False, "", str(note)
    stderr = result.stderr.strip()
    if result.status is Status.OOM or (result.status is Status.KILLED and kill_note):
        stderr = f"{stderr}\n{note}" if stderr else str(note)
    return result.exit_code == 0, result.stdout, stderr


class PythonCodeTool(SandboxTool):
    """GEM's ``PythonCodeTool(timeout, sandbox_type, keep_error_last_line)``, sandboxed.

    ``keep_error_last_line`` shows only the last line of stderr (usually the exception).
    ``sandbox_type`` is accepted for GEM's signature and does not route anything: every run
    is isolated, on ``runtime``'s backend. ``standard_imports=False`` turns GEM's re-run off;
    ``max_output_chars`` (None, GEM's: no cap) cuts the middle out of a longer observation.
    """

    name: ClassVar[str] = "python"
    tool_type: ClassVar[str] = "python_code"
    description: ClassVar[str] = "Run Python code in a sandbox and return what it prints (stdout, then stderr)."
    parameters: ClassVar[dict[str, Any]] = one_string_argument("code", "Python source, e.g. print(2**10)")

    def __init__(
        self,
        timeout: float = 5,
        sandbox_type: str = "none",
        keep_error_last_line: bool = False,
        *,
        stateful: bool = False,
        standard_imports: bool = True,
        max_output_chars: int | None = None,
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
        self.standard_imports = standard_imports

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
        return await run_like_gem(runtime, code, timeout=self.timeout, standard_imports=self.standard_imports)

    def observation(self, result: ExecResult) -> str:
        """GEM's: stdout, then stderr on a new line when there is any (both as
        :func:`as_gem_answer` words them; a stateful kernel's kill is said too), left-stripped,
        after ``Code execution result: `` and before a newline."""
        _, stdout, stderr = as_gem_answer(result, self.timeout, kill_note=self.stateful)
        if stderr and self.keep_error_last_line:
            stderr = stderr.split("\n")[-1]
        text = f"{stdout}\n{stderr}" if stderr else stdout
        return OBSERVATION_PREFIX + cap(text.lstrip(" \n"), self.max_output_chars) + "\n"
