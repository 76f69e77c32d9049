"""Kernels: persistent Python namespaces, one forked process per kernel name.

Output is captured at the descriptor level (the kernel's fds 1 and 2 are the agent's pipes),
so what ``os.system`` or a C extension prints is captured too. An exception prints its
traceback and fails the command, but the namespace survives. A timeout first sends SIGINT (a
``KeyboardInterrupt`` the namespace survives); a kernel that is not back within half a
second is killed, and the next command starts a fresh one. The kernel's side of this lives
in :func:`.pyexec.serve_cells`.
"""

import os
import signal

from .protocol import text_bytes
from .sessions import Sessions


class Kernels(Sessions):
    shows = True

    def orders(self):
        return {"program": "kernel"}

    def encode(self, seq, text, header):
        code = text_bytes(text)
        mode = b" display" if header.get("display") else b""  # see pyexec.serve_cells
        return b"%d %d%s\n%s" % (seq, len(code), mode, code)

    async def interrupt(self, session):
        try:
            os.kill(session.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
