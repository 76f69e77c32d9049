"""Running Python source inside a forked child the way the ``python`` command would.

Used by runs (``python -c`` semantics) and kernels (one namespace, many commands, shown as a
notebook shows them). All of it runs in the child, after :mod:`.children` has set up
descriptors, limits and identity. It is imported by the zygote, which every run forks from,
so what only kernels need (``ast``, ``json``) is imported by :func:`load_kernel_modules`.
"""

import atexit
import os
import sys
import types

COMMANDS_FD = 4  # kernels: "<seq> <length>\n" and that many bytes of source, per command
STATUS_FD = 3  # kernels: "<seq> <0 or 1>\n" out per command
DISPLAY_FD = 5  # kernels: one JSON object (a MIME bundle) per line, per thing a command shows
PLOTS = "plots"  # the module of this package that is matplotlib's backend in kernels
# What a notebook shows of a value besides its repr: (MIME type, the method that renders it).
RICH_FORMATS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
)


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
    global ast, binascii, builtins, json
    import ast
    import binascii
    import builtins
    import json


def serve_cells(cwd):
    """A kernel: run each command from fd 4 in one namespace, answering ``<seq> 0`` (ok) or
    ``<seq> 1`` (raised) on fd 3, until the agent hangs up. What a command shows goes out as
    display data on fd 5, before its status: what it passes to ``display()``, its matplotlib
    figures and, for a command sent as ``<seq> <length> display``, the value of its last
    statement when that is an expression (Jupyter's ``Out``); otherwise that value is
    printed, as Python's interactive prompt does. Needs :func:`load_kernel_modules`."""
    namespace = _new_main(cwd, "")
    builtins.display = display  # where IPython puts it: every module of the kernel sees it
    sys.meta_path.insert(0, _InlinePlots())
    commands = os.fdopen(COMMANDS_FD, "rb", buffering=65536, closefd=False)
    while True:
        try:
            head = commands.readline()
            if not head:
                return _finish(0)
            seq, length, *mode = head.split()
            code = commands.read(int(length))
            failed = _run_cell(code.decode("utf-8", "surrogateescape"), namespace, b"display" in mode)
            failed = _show_figures() or failed
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(STATUS_FD, b"%s %d\n" % (seq, failed))
        except KeyboardInterrupt:
            continue  # an interrupt that arrived between commands
        except SystemExit as exc:
            return _finish(_exit_code(exc))


def display(*objects):
    """Show each object as a notebook would: its repr as ``text/plain``, plus whatever rich
    forms it renders (``_repr_png_`` and the like, see :data:`RICH_FORMATS`)."""
    for obj in objects:
        publish(_bundle(obj))


def _bundle(obj):
    bundle = {}
    for mime, method in RICH_FORMATS:
        rendered = _render(obj, method)
        if isinstance(rendered, bytes):
            rendered = binascii.b2a_base64(rendered, newline=False).decode("ascii")
        if rendered is not None:
            bundle[mime] = rendered
    bundle["text/plain"] = repr(obj)
    return bundle


def publish(bundle, value=False):
    """Send one MIME bundle (type -> data; binary data as base64 text) to the agent; the
    cell's ``value`` (Jupyter's execute_result) goes wrapped, see :mod:`.shown`."""
    line = json.dumps({"value": bundle} if value else bundle, default=repr).encode("ascii") + b"\n"
    sys.stdout.flush()  # what the cell printed before it showed this stays before it
    sys.stderr.flush()
    with memoryview(line) as view:
        while view:
            view = view[os.write(DISPLAY_FD, view) :]


def _render(obj, method):
    """``obj.<method>()`` when it gives text, bytes or (JSON) a dict or list; None when it
    has no such method, it fails, or it gives anything else (IPython skips those too)."""
    if isinstance(obj, type):
        return None  # a class's methods are unbound: showing a class shows its repr
    try:
        render = getattr(obj, method, None)
        rendered = render() if callable(render) else None
    except Exception:
        return None
    return rendered if isinstance(rendered, (str, bytes, dict, list)) else None


def _run_cell(code, namespace, show_value):
    """Run one command; True when it raised. The value of a last statement that is an
    expression is printed, as Python's prompt does, or with ``show_value`` shown as display
    data unless it is None or a ``;`` ends the statement: Jupyter's rule, so in a notebook
    ``sys.stderr.write("x")`` shows ``1`` as display data and prints nothing."""
    try:
        tree = ast.parse(code, "<cell>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<cell>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
            if not show_value:
                sys.displayhook(value)  # Python's prompt: prints the repr, keeps it as _
            elif value is not None and not _silenced(code, last):
                builtins._ = value
                publish(_bundle(value), value=True)
        return False
    except SystemExit:
        raise
    except BaseException as exc:
        _print_uncaught(exc)
        return True


def _silenced(code, last):
    """Whether a ``;`` follows the expression ``last`` (IPython's way to hide a value)."""
    lines = code.encode("utf-8", "surrogateescape").splitlines()
    rest = lines[last.end_lineno - 1][last.end_col_offset :] if last.end_lineno <= len(lines) else b""
    return rest.lstrip().startswith(b";")


def _show_figures():
    """The end of a cell, for matplotlib's figures: the inline backend shows and closes
    what is still open. True when that raised (a figure that cannot be drawn)."""
    plots = sys.modules.get("%s.%s" % (__package__, PLOTS))
    if plots is None:
        return False
    try:
        plots.show()
        return False
    except BaseException as exc:
        _print_uncaught(exc)
        return True


class _InlinePlots:
    """An import hook that, as pyplot is first imported, makes :mod:`.plots` matplotlib's
    backend, as a Jupyter kernel starts with ``%matplotlib inline`` (Debian's matplotlibrc
    names TkAgg, which a sandbox cannot show). ``MPLBACKEND`` still chooses another, and
    ``matplotlib.use`` after the import switches away. Only the kernel has the hook: a
    program the code starts keeps matplotlib's own default."""

    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib.pyplot":
            sys.meta_path.remove(self)
            matplotlib = sys.modules.get("matplotlib")
            if matplotlib is not None and "MPLBACKEND" not in os.environ:
                matplotlib.rcParams["backend"] = "module://%s.%s" % (__package__, PLOTS)
        return None  # found by the usual finders


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
