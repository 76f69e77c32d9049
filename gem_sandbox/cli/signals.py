"""Opt-in: let SIGTERM unwind the process as Ctrl-C does, so sandboxes are removed on exit.

A library must not take over a process's signals, so nothing here runs unless called: the
``gem-sandbox`` command calls :func:`exit_on_sigterm`, and an application may too.
"""

from __future__ import annotations

import signal
import threading


def exit_on_sigterm() -> bool:
    """Make SIGTERM raise ``SystemExit(143)`` in the main thread, so ``with``/``finally`` blocks
    and exit hooks close every runtime. Only when SIGTERM still has its default action and we
    are on the main thread; returns whether the handler was installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _raise_system_exit)
    return True


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
