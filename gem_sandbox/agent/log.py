"""The agent's log: ``gem-agent LEVEL message`` lines on stderr (or ``--log-fd``).

Not :mod:`logging`, which with what it imports (threading, traceback, string, weakref...)
is 1.5 MB of every sandbox's private memory for a handful of lines a day. A traceback is
formatted only when one is logged.
"""

import sys

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_threshold = LEVELS["warning"]


def configure(level):
    """Log ``level`` (a name of :data:`LEVELS`, any case) and above."""
    global _threshold
    if level.lower() not in LEVELS:
        raise ValueError("unknown log level %r; one of %s" % (level, ", ".join(LEVELS)))
    _threshold = LEVELS[level.lower()]


def _write(level, message, args, trace=False):
    if LEVELS[level] < _threshold:
        return
    if args:
        message = message % args
    line = "gem-agent %s %s\n" % (level.upper(), message)
    if trace:
        import traceback

        line += traceback.format_exc()
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # nobody reads the log any more: the agent goes on


def warning(message, *args):
    _write("warning", message, args)


def error(message, *args):
    _write("error", message, args)


def exception(message, *args):
    """An error with the traceback of the exception being handled."""
    _write("error", message, args, trace=True)
