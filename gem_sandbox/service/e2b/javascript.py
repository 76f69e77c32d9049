"""JavaScript contexts of the code interpreter (``run_code(..., language="javascript")``): a
Node process per context, spawned in the sandbox as its user, that keeps one global scope
across cells, as Node's REPL does.

The process runs :data:`DRIVER`, which reads cells from its stdin (``<length>\\n<code>``),
runs each with ``vm.runInThisContext`` (awaiting a promise it evaluates to), and ends each
with a line that starts with a random mark, on stderr and on stdout, the latter with the
cell's value (``util.inspect``) or its error as JSON. What a cell prints before the marks is
its output; stdout goes to the client while the cell runs. The mark is the service's secret,
so code cannot end a cell early by printing one. A cell past the timeout kills the process
(the context starts afresh at its next cell).
"""

from __future__ import annotations

import json
import secrets
import shlex
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from gem_sandbox.runtime import LeasedSandbox
from gem_sandbox.sandbox.spawned import Process
from gem_sandbox.sandbox.errors import ProcessEnded

LANGUAGES = {"javascript": "nodejs", "js": "nodejs"}  # e2b's names -> the agent's language

DRIVER = r"""(() => {  // a function's scope: cells run in the global one and cannot see MARK
const vm = require('vm'), util = require('util');
const MARK = process.env.GEM_MARK;
delete process.env.GEM_MARK;
globalThis.require = require;
let pending = Buffer.alloc(0), queue = Promise.resolve();
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  for (;;) {
    const newline = pending.indexOf(10);
    if (newline < 0) return;
    const length = Number(pending.subarray(0, newline).toString());
    if (pending.length < newline + 1 + length) return;
    const code = pending.subarray(newline + 1, newline + 1 + length).toString();
    pending = pending.subarray(newline + 1 + length);
    queue = queue.then(() => run(code));
  }
});
const written = (stream, text) => new Promise((done) => stream.write(text, done));
async function run(code) {
  let answer = {};
  try {
    let value = vm.runInThisContext(code, { filename: '<cell>' });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) answer = { text: util.inspect(value) };
  } catch (error) {
    const failed = error instanceof Error ? error : new Error(String(error));
    answer = { error: { name: failed.name, value: failed.message, traceback: failed.stack || String(failed) } };
  }
  await written(process.stderr, MARK + '\n');
  await written(process.stdout, MARK + ' ' + JSON.stringify(answer) + '\n');
}
})();
"""


@dataclass
class Cell:
    """What a JavaScript cell printed and its answer: ``text`` (its value) or ``error``;
    ``answer`` is None when it ran past its timeout or its process ended."""

    stdout: str = ""
    stderr: str = ""
    answer: dict[str, Any] | None = None


@dataclass(eq=False)
class NodeContext:
    """A context's Node process and its output not yet taken."""

    process: Process
    mark: bytes
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one cell at a time, as a kernel runs them

    @classmethod
    async def start(cls, sandbox: LeasedSandbox, env: dict[str, str], cwd: str) -> NodeContext:
        mark = secrets.token_hex(16)
        code = f"cd -- {shlex.quote(cwd)} && exec node -e {shlex.quote(DRIVER)}"
        process = await sandbox.spawn(code, "bash", stdin_open=True, env={**env, "GEM_MARK": mark})  # type: ignore[attr-defined]
        return cls(process, mark.encode())

    @property
    def alive(self) -> bool:
        return self.process.running

    async def run(self, code: str, timeout: float, on_stdout: Callable[[str], Awaitable[None]]) -> Cell:
        """Run one cell, telling ``on_stdout`` what it prints as it prints it."""
        async with self.lock:
            return await self._run(code, timeout, on_stdout)

    async def _run(self, code: str, timeout: float, on_stdout: Callable[[str], Awaitable[None]]) -> Cell:
        source = code.encode()
        try:
            await self.process.write(b"%d\n%s" % (len(source), source))
        except ProcessEnded:
            return Cell(stderr="the JavaScript context's process ended; it starts afresh at the next cell")
        told = 0
        cell = Cell()
        with anyio.move_on_after(timeout):
            while cell.answer is None or self.mark not in self.err:
                chunk = await self.process.next_output()
                if chunk is None:
                    break
                (self.out if chunk[0] == 1 else self.err).extend(chunk[1])
                end = self.out.find(self.mark)
                safe = end if end >= 0 else max(told, len(self.out) - _partial_mark(self.out, self.mark))
                if safe > told:
                    await on_stdout(self.out[told:safe].decode(errors="replace"))
                    told = safe
                if end >= 0 and cell.answer is None and (line_end := self.out.find(b"\n", end)) >= 0:
                    cell.stdout = self.out[:end].decode(errors="replace")
                    cell.answer = _answer(self.out[end + len(self.mark) : line_end])
                    del self.out[: line_end + 1]
        if cell.answer is None or self.mark not in self.err:
            await self.close()
            return Cell(stdout=self.out[:told].decode(errors="replace"), stderr=self.err.decode(errors="replace"))
        end = self.err.find(self.mark)
        cell.stderr = self.err[:end].decode(errors="replace")
        del self.err[: end + len(self.mark) + 1]
        return cell

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.process.signal(signal.SIGKILL)
            except ProcessEnded:
                pass
            await self.process.wait()


def _partial_mark(data: bytearray, mark: bytes) -> int:
    """How many of ``data``'s last bytes may be the start of ``mark`` (held back until the
    next output tells)."""
    return next((k for k in range(min(len(mark) - 1, len(data)), 0, -1) if data.endswith(mark[:k])), 0)


def _answer(line: bytes) -> dict[str, Any]:
    """The driver's JSON after a mark; ``{}`` for anything else (never trusted further)."""
    try:
        answer = json.loads(line)
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}
