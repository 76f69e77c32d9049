"""Is a model's answer equivalent to a reference answer? math-verify decides, under a hard time limit.

math-verify bounds its own work with ``signal.alarm``, which only the main thread may set, and
envs are stepped from worker threads too (the sync bridge, ``anyio.to_thread``, trainers). Off
the main thread a check must then run unbounded, and an answer can make sympy work for hours
(``9^{9^{9^{9}}}``); a signal would not stop a long call into C anyway. So each check runs with
math-verify's timeouts off, in a worker process that is killed when it overruns: the limit
holds from any thread, for any answer.

Workers are fresh interpreters running this module (unlike multiprocessing's, they neither
re-import the caller's ``__main__`` nor copy a threaded process by forking), started on demand,
one per concurrent check up to :data:`MAX_WORKERS`, and reused. A worker reads one JSON request
a line on stdin and writes one verdict a line on stdout.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from functools import cache

#: Seconds one check may take (GEM allows 1; a loaded machine needs some slack).
CHECK_TIMEOUT = 2.0
#: Seconds a new worker may take to import math-verify and warm up.
START_TIMEOUT = 120.0
#: Workers at most (each holds sympy, ~70 MB); checks take milliseconds, so a few keep up.
MAX_WORKERS = min(8, os.cpu_count() or 1)
_READY = b"ready\n"
_VERDICTS = {b"1\n": True, b"0\n": False}


def equivalent(answer: str, references: Sequence[str]) -> bool:
    """Whether ``answer`` (the content of the model's ``\\boxed{}``) means the same as one of
    ``references``. Runs math-verify inline, without a time limit: call it in a worker."""
    from math_verify import parse, verify

    target = parse(f"\\boxed{{{answer}}}", parsing_timeout=None)  # type: ignore[arg-type]
    for reference in references:
        boxed = reference if "\\boxed" in reference else f"\\boxed{{{reference}}}"
        gold = parse(boxed, parsing_timeout=None)  # type: ignore[arg-type]
        if verify(gold, target, timeout_seconds=None):
            return True
    return False


class _Worker:
    """One worker process and its pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        if self._read_line(START_TIMEOUT) != _READY:
            self.kill()
            raise RuntimeError(
                f"the math answer checker ({sys.executable} -m {__name__}) did not start; "
                "its error, if any, is on stderr"
            )

    def ask(self, answer: str, references: Sequence[str], timeout: float) -> bool | None:
        """The worker's verdict, or None when it did not give one within ``timeout``."""
        request = json.dumps({"answer": answer, "references": list(references)}) + "\n"
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(request.encode())
            self.process.stdin.flush()
        except BrokenPipeError:
            return None
        line = self._read_line(timeout)
        return None if line is None else _VERDICTS.get(line)  # None too for a dead worker's b""

    def _read_line(self, timeout: float) -> bytes | None:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        return self.process.stdout.readline() if ready else None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class AnswerChecker:
    """Checks answers in a pool of worker processes; safe to call from any thread."""

    def __init__(self, max_workers: int = MAX_WORKERS) -> None:
        self._slots = threading.BoundedSemaphore(max_workers)
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._pid = os.getpid()

    def check(self, answer: str, references: Sequence[str], timeout: float = CHECK_TIMEOUT) -> bool | None:
        """Whether ``answer`` is equivalent to one of ``references``; None when the check did
        not finish within ``timeout`` seconds (its worker was killed) or its worker died."""
        if answer.strip() in (reference.strip() for reference in references):
            return True  # the same text: nothing to compute
        with self._slots:
            worker = self._take()
            verdict = worker.ask(answer, references, timeout)
            if verdict is None:
                worker.kill()
            else:
                with self._lock:
                    self._idle.append(worker)
            return verdict

    def _take(self) -> _Worker:
        with self._lock:
            self._forget_inherited()
            if self._idle:
                return self._idle.pop()
        return _Worker()

    def _forget_inherited(self) -> None:
        """In a forked child the idle workers are the parent's: leave them to it."""
        if os.getpid() != self._pid:
            self._idle, self._pid = [], os.getpid()

    def close(self) -> None:
        """Stop the idle workers; a later check starts new ones."""
        with self._lock:
            self._forget_inherited()
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()


@cache
def default_checker() -> AnswerChecker:
    """The process's checker, shared by every env (workers are costly: one sympy each)."""
    checker = AnswerChecker()
    atexit.register(checker.close)
    return checker


def _exit_with_parent(parent: int) -> None:
    """Exit once the env process is gone: nobody is left to kill a check that hangs."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def serve() -> None:
    """The worker: warm up, say ready, then answer one verdict per request line until EOF."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled": we know
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    equivalent("0.5", ["\\frac{1}{2}"])  # imports and sympy's caches, outside any time limit
    out = sys.stdout.buffer
    out.write(_READY)
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            same = equivalent(request["answer"], request["references"])
        except Exception:  # math-verify's own rule for what it cannot handle: not equivalent
            same = False
        out.write(b"1\n" if same else b"0\n")
        out.flush()


if __name__ == "__main__":
    serve()
