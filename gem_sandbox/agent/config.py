"""The agent's command line: what the backend that starts it decides about this sandbox.

Parsed with :mod:`getopt` rather than :mod:`argparse`: argparse and what it imports stay in
every agent's memory for its whole life (0.6 MB of it, times every sandbox on a host), for a
command line that only backends write.
"""

import getopt
import os
import sys
import types

DESCRIPTION = """\
gem-sandbox agent: serves the framed protocol (see protocol.py) on stdin/stdout and logs to
stderr. Runs, kernels and shells are forked as separate processes with rlimits. Started as
root with --uid-base, each gets its own uid from the range and all capabilities are dropped;
otherwise each is tagged with a token in its environment and killed by session, descent and
token.
"""

# name, kind (str, int, list: repeatable, bool: a bare flag), default, help
OPTIONS = (
    ("workdir", str, "/work", "where code runs and files go (default /work)"),
    ("tmpdir", str, "/tmp", "TMPDIR of runs, emptied on reset (default /tmp)"),
    ("scratch", list, (), "another world-writable dir emptied on reset, e.g. /dev/shm (repeatable)"),
    (
        "uid-base",
        int,
        None,
        "first uid of this sandbox's range; with it, a root agent runs each run, kernel and shell "
        "as its own uid (without it, or when not root: token mode)",
    ),
    ("uid-count", int, 64, "uids in the range: concurrent runs (64)"),
    ("gid", int, None, "group shared by all runs and owning the work dir (uid-base)"),
    (
        "nproc",
        int,
        None,
        "RLIMIT_NPROC of runs; give it only where the kernel counts it per sandbox (a uid range "
        "of its own, or a user namespace of its own)",
    ),
    ("threads", int, 1, "OMP_NUM_THREADS and friends for runs (1)"),
    ("memory-mb", int, None, "ceiling on every run's RLIMIT_AS, whatever it asks"),
    (
        "oom-counter",
        str,
        None,
        "PATH: the sandbox cgroup's file with an oom_kill count (memory.events, "
        "memory.oom_control), or 'auto' to find it under /sys/fs/cgroup; without it no run is "
        "ever reported as oom",
    ),
    ("stream-fd", int, None, "speak the protocol on this inherited socket instead of stdin and stdout"),
    ("base64", bool, False, "carry the stream as lines of base64, for transports that pass only text"),
    ("log-fd", int, None, "log to this inherited descriptor instead of stderr"),
    ("log-level", str, "warning", "stderr log level (warning)"),
)
PROG = "gem_agent"


def usage():
    lines = ["usage: %s [options]" % PROG, "", DESCRIPTION, "options:", "  --help  show this and exit"]
    for name, kind, _, text in OPTIONS:
        flag = "--" + name if kind is bool else "--%s %s" % (name, name.split("-")[-1].upper())
        lines.append("  %s\n      %s" % (flag, text))
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    """The options as attributes (``uid_base``, ``log_level``...), plus ``uid_mode``. Bad
    options print the usage and exit with status 2, as argparse would."""
    argv = sys.argv[1:] if argv is None else list(argv)
    kinds = dict((name, kind) for name, kind, _, _ in OPTIONS)
    config = types.SimpleNamespace(
        **dict((name.replace("-", "_"), list(default) if kind is list else default)
               for name, kind, default, _ in OPTIONS)
    )
    longopts = ["help"] + [name if kind is bool else name + "=" for name, kind in kinds.items()]
    try:
        given, rest = getopt.getopt(argv, "", longopts)
        if rest:
            raise getopt.GetoptError("unrecognized arguments: %s" % " ".join(rest))
        for flag, value in given:
            name = flag[2:]
            if name == "help":
                sys.stdout.write(usage())
                sys.exit(0)
            _set(config, name, kinds[name], value)
        if config.uid_count < 1:
            raise getopt.GetoptError("--uid-count must be at least 1")
    except getopt.GetoptError as exc:
        sys.stderr.write("usage: %s [options] (--help lists them)\n%s: error: %s\n" % (PROG, PROG, exc))
        sys.exit(2)
    if config.gid is None:
        config.gid = config.uid_base
    # Each tenant its own uid: given a range and root to switch to it; else token mode.
    config.uid_mode = config.uid_base is not None and os.geteuid() == 0
    return config


def _set(config, name, kind, value):
    attribute = name.replace("-", "_")
    if kind is bool:
        setattr(config, attribute, True)
    elif kind is list:
        getattr(config, attribute).append(value)
    elif kind is int:
        try:
            setattr(config, attribute, int(value))
        except ValueError:
            raise getopt.GetoptError("--%s: invalid int value: %r" % (name, value)) from None
    else:
        setattr(config, attribute, value)
