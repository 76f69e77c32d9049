"""The in-sandbox agent: one long-lived process per sandbox that runs code on the host's behalf.

It speaks :mod:`.protocol` on its stdin and stdout and forks every run, kernel and shell as
an unprivileged process with limits. It is standard library only and runs on Python >= 3.8,
because it is mounted or copied into sandboxes whose only Python is the image's own. The host
imports this package as ``gem_sandbox.agent``; inside a sandbox its directory is mounted at
:data:`MOUNT_POINT` and started as ``gem_agent`` (hence relative imports throughout).
"""

import os

# The modules of this package that the host imports, besides this one: what both ends of the
# protocol share. The rest are the agent's own (tests/test_agent_boundary.py holds the host
# to this list), so they can change without the host noticing.
HOST_SHARED = ("protocol",)

AGENT_DIR = os.path.dirname(os.path.abspath(__file__))
MOUNT_POINT = "/opt/gem-sandbox/gem_agent"  # where backends put AGENT_DIR inside a sandbox
START_DIR = os.path.dirname(MOUNT_POINT)  # the cwd to start the agent in
# Capabilities a root agent keeps (every backend drops the rest): SETUID and SETGID to give
# each run its own uid, KILL to kill a run's processes by uid, DAC_OVERRIDE, FOWNER and CHOWN
# to empty the work dir between tenants whatever modes the code left. Runs keep none.
AGENT_CAPS = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "FOWNER", "CHOWN")
# World-writable dirs besides the tmpdir that every backend gives a sandbox (a tmpfs and a
# POSIX message queue mount); passed as --scratch so the agent empties them on reset.
SCRATCH_DIRS = ("/dev/shm", "/dev/mqueue")


def command(python="python3", **options):
    """The argv that starts the agent, run with cwd :data:`START_DIR`.

    Each keyword is a command-line option of the agent (``uid_base=200000`` becomes
    ``--uid-base 200000``; a list repeats the option; ``True`` is a bare flag; ``None`` and
    ``False`` leave it out). See
    ``python3 -m gem_agent --help`` for the options. ``-s -E`` keep the image's user site and
    ``PYTHON*`` variables from changing what the agent imports.
    """
    argv = [python, "-s", "-E", "-m", "gem_agent"]
    for name, value in sorted(options.items()):
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv += [flag] if value else []
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if item is not None:
                argv += [flag, str(item)]
    return argv
