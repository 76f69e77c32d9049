"""Sandbox code every trusted harness runs first: ``python -I`` by hand, for a harness kernel
is a fork of the agent's warm interpreter, whose path starts at the work dir.

It drops every ``sys.path`` entry another uid could write to (the work dir, ``/tmp``) or could
create later (a missing one), so that no import the harness makes after this, nor one the
test it holds makes, can be redirected. Sent as the start of a harness's first cell, before
the harness's own source and imports (``os`` and ``sys`` are loaded already).
"""

import os
import sys


def isolate():
    unsafe = [os.path.realpath(os.getcwd()), os.path.realpath(os.environ.get("TMPDIR", "/tmp"))]

    def safe(entry):
        path = os.path.realpath(entry or ".")
        inside = any(path == top or path.startswith(top + os.sep) for top in unsafe)
        return bool(entry) and not inside and os.path.exists(path) and not os.access(path, os.W_OK)

    sys.path[:] = [entry for entry in sys.path if safe(entry)]
    sys.path_importer_cache.clear()
    sys.dont_write_bytecode = True


isolate()
