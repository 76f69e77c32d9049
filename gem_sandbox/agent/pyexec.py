"""Running Python source inside a forked child the way the ``python`` command would.

Used by runs (``python -c`` semantics) and kernels (one namespace, many commands). All of it
runs in the child, after :mod:`.children` has set up descriptors, limits and identity.
"""

import atexit
import os
import sys
import types

COMMANDS_FD = 4  # kernels: "<seq> <length>\n" and that many bytes of source, per command
STATUS_FD = 3  # kernels: "<seq> <0 or 1>\n" out per command


def fresh_stdio():
    """New ``sys.std*`` objects on descriptors 0-2, encoded as CPython would with
    ``LANG=C.UTF-8``. stdout is line-buffered rather than block-buffered: when a run is
    killed at its deadline, what it printed so far is still captured."""
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", buffering=1, closefd=False)
    sys.stderr = sys.__stderr__ = open(
        2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )


def run_source(code, cwd):
    """``python -c code``, in this process; returns the exit status."""
    namespace = _new_main(cwd, "-c")
    try:
        exec(compile(code, "<string>", "exec"), namespace)
        status = 0
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException as exc:
        _print_uncaught(exc)
        status = 1
    return _finish(status)


def load_kernel_modules():
    """Import what a kernel needs beyond a run, while the child can still read everything
    (before it becomes its tenant): not in the zygote, where every run would carry it."""
    global ast
    import ast


def serve_cells(cwd):
    """A kernel: run each command from fd 4 in one namespace, answering ``<seq> 0`` (ok) or
    ``<seq> 1`` (raised) on fd 3, until the agent hangs up. Like a notebook cell, a command
    whose last statement is an expression prints its repr. Needs :func:`load_kernel_modules`."""
    namespace = _new_main(cwd, "")
    commands = os.fdopen(COMMANDS_FD, "rb", buffering=65536, closefd=False)
    while True:
        try:
            head = commands.readline()
            if not head:
                return _finish(0)
            seq, length = head.split()
            code = commands.read(int(length))
            failed = _run_cell(code.decode("utf-8", "surrogateescape"), namespace)
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(STATUS_FD, b"%s %d\n" % (seq, failed))
        except KeyboardInterrupt:
            continue  # an interrupt that arrived between commands
        except SystemExit as exc:
            return _finish(_exit_code(exc))


def _run_cell(code, namespace):
    """Run one command; True when it raised."""
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), namespace)
        if last is not None:
            exec(compile(ast.Interactive([last]), "<cell>", "single"), namespace)
        return False
    except SystemExit:
        raise
    except BaseException as exc:
        _print_uncaught(exc)
        return True


def _new_main(cwd, argv0):
    """A fresh ``__main__`` module (its dict is the namespace code runs in), with the
    agent's traces gone from ``sys.argv``, ``sys.path[0]`` and atexit."""
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = [argv0]
    sys.path[0] = cwd
    atexit._clear()
    return main.__dict__


def _print_uncaught(exc):
    """Print a traceback like CPython's for an exception raised by user code. The first
    frame is the agent's ``exec`` call and is dropped; a syntax error shows no frames."""
    tb = exc.__traceback__
    tb = None if isinstance(exc, SyntaxError) or tb is None else tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def _exit_code(exc):
    """The exit status ``python`` gives a ``SystemExit``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(status):
    """What the interpreter does at exit: join non-daemon threads, run atexit handlers,
    flush. Returns ``status`` for the caller to ``os._exit`` with."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return status
