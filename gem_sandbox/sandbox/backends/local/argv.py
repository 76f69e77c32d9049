"""The bwrap command line of a local sandbox: namespaces, binds, tmpfs sizes, generated /etc.

Pure functions from a spec and the host's layout to bwrap options, kept apart from starting
and killing processes so that what a sandbox can see is read in one place (and
:meth:`LocalBackend.check` probes with the same namespaces and binds as a real launch).
"""

from __future__ import annotations

import os

from gem_sandbox import agent
from gem_sandbox.sandbox.backends.base import MIB, SandboxSpec

_HOST_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_HOST_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/java-17-openjdk",  # the JDK's conf/security files are links into it
    "/etc/matplotlibrc",  # Debian's matplotlib reads its defaults from it, and fontconfig
    "/etc/fonts",
)


def namespace_options(rootless: bool) -> list[str]:
    options = [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
    ]
    if not rootless:
        # No user namespace: real uids, so the agent can run each run as its own.
        options += ["--cap-drop", "ALL"]
        for cap in agent.AGENT_CAPS:
            options += ["--cap-add", f"CAP_{cap}"]
    else:
        # Runs share the agent's uid: as pid 1 of the sandbox (no bwrap init) the kernel
        # keeps their signals from it (see gem_sandbox.agent.server.serve).
        options += ["--unshare-user", "--disable-userns", "--as-pid-1"]
    return options


def system_binds() -> list[str]:
    options = ["--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
    for path in ("/etc", "/home", "/opt", agent.START_DIR):  # bwrap would make missing parents 0700
        options += ["--perms", "0755", "--dir", path]
    for path in _HOST_LINKS:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    for path in _HOST_ETC:
        options += ["--ro-bind-try", path, path]
    return options


def sandbox_options(spec: SandboxSpec, python: str) -> list[str]:
    """The sandbox's own mounts and environment: ``python``'s installation when it is not
    under ``/usr``, sized tmpfs, the agent read-only, a cleared environment."""
    options = []
    python_home = os.path.dirname(os.path.dirname(os.path.realpath(python)))
    if not python_home.startswith("/usr"):
        options += ["--ro-bind", python_home, python_home]
    for size_mb, mode, path in (
        (spec.tmp_mb, "1777", "/tmp"),
        (spec.tmp_mb, "1777", "/dev/shm"),
        (spec.workdir_mb, "0755", "/work"),
    ):
        options += ["--size", str(size_mb * MIB), "--perms", mode, "--tmpfs", path]
    options += ["--symlink", "/work", "/home/user"]  # e2b's home dir, as in the Docker image
    options += ["--mqueue", "/dev/mqueue"]  # POSIX queues, listed and emptied on reset
    options += ["--ro-bind", agent.AGENT_DIR, agent.MOUNT_POINT, "--chdir", agent.START_DIR]
    options += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
    options += ["--setenv", "LANG", "C.UTF-8"]
    return options


def generated_etc(uids: range | list[int], gid: int) -> dict[str, str]:
    """``/etc`` files naming the sandbox's users, so ``whoami`` and ``getpass`` work."""
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
    users += [f"sandbox:x:{uid}:{gid}:sandbox:/work:/bin/bash" for uid in uids if uid != 0]
    users.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
    groups = ["root:x:0:", f"sandbox:x:{gid}:", "nogroup:x:65534:"]
    return {
        "/etc/passwd": "\n".join(users) + "\n",
        "/etc/group": "\n".join(groups) + "\n",
        "/etc/hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    }
