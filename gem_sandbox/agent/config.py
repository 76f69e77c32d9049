"""The agent's command line: what the backend that starts it decides about this sandbox."""

import argparse
import os

DESCRIPTION = """\
gem-sandbox agent: serves the framed protocol (see protocol.py) on stdin/stdout and logs to
stderr. Runs, kernels and shells are forked as separate processes with rlimits. Started as
root with --uid-base, each gets its own uid from the range and all capabilities are dropped;
otherwise each is tagged with a token in its environment and killed by session, descent and
token.
"""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="gem_agent", description=DESCRIPTION)
    add = parser.add_argument
    add("--workdir", default="/work", help="where code runs and files go (default /work)")
    add("--tmpdir", default="/tmp", help="TMPDIR of runs, emptied on reset (default /tmp)")
    add(
        "--scratch",
        action="append",
        default=[],
        metavar="DIR",
        help="another world-writable dir emptied on reset, e.g. /dev/shm (repeatable)",
    )
    add(
        "--uid-base",
        type=int,
        help="first uid of this sandbox's range; with it, a root agent runs each run, kernel "
        "and shell as its own uid (without it, or when not root: token mode)",
    )
    add("--uid-count", type=int, default=64, help="uids in the range: concurrent runs (64)")
    add("--gid", type=int, help="group shared by all runs and owning the work dir (uid-base)")
    add(
        "--nproc",
        type=int,
        help="RLIMIT_NPROC of runs; give it only where the kernel counts it per sandbox "
        "(a uid range of its own, or a user namespace of its own)",
    )
    add("--threads", type=int, default=1, help="OMP_NUM_THREADS and friends for runs (1)")
    add("--memory-mb", type=int, help="ceiling on every run's RLIMIT_AS, whatever it asks")
    add(
        "--oom-counter",
        metavar="PATH",
        help="the sandbox cgroup's file with an oom_kill count (memory.events, "
        "memory.oom_control), or 'auto' to find it under /sys/fs/cgroup; without it no run "
        "is ever reported as oom",
    )
    add(
        "--stream-fd",
        type=int,
        help="speak the protocol on this inherited socket instead of stdin and stdout",
    )
    add(
        "--base64",
        action="store_true",
        help="carry the stream as lines of base64, for transports that pass only text",
    )
    add("--log-fd", type=int, help="log to this inherited descriptor instead of stderr")
    add("--log-level", default="warning", help="stderr log level (warning)")
    config = parser.parse_args(argv)
    if config.gid is None:
        config.gid = config.uid_base
    if config.uid_count < 1:
        parser.error("--uid-count must be at least 1")
    # Each tenant its own uid: given a range and root to switch to it; else token mode.
    config.uid_mode = config.uid_base is not None and os.geteuid() == 0
    return config
