"""Uid ranges: each sandbox's runs get uids that no other live sandbox on this host uses.

Why: the kernel counts some limits per uid across the whole host (processes, POSIX message
queue bytes, inotify instances, pending signals, keyring quotas), and the agent kills a
timed-out run by uid; sandboxes that shared uids could exhaust or kill each other's. So each
root-mode sandbox, container or not, gets a range of :data:`UIDS_PER_SANDBOX` uids of its own.

How: the uids from :data:`FIRST_UID` are cut into :data:`BLOCKS` blocks of a million, each
cut into slots of a thousand whose first :data:`UIDS_PER_SANDBOX` uids are one sandbox's
range. A host process owns a block while it holds an exclusive ``flock`` on the block's lock
file in :data:`LOCK_DIR`; the kernel drops the lock when the process dies, so a crashed
owner's block is free again. A process claims the first free block, and the next when its
slots run out. A slot goes back when its box is killed (oldest-freed first), so a long-lived
process never hands out a range a live sandbox of its own still uses.

What this cannot see: Docker containers of a crashed owner keep running, with their uids,
until :meth:`~gem_sandbox.sandbox.backends.base.Backend.reap_orphans` removes them; the pool
reaps at start. Bubblewrap sandboxes die with their owner (``--die-with-parent``).
"""

from __future__ import annotations

import collections
import fcntl
import functools
import os
import stat
import threading
import weakref

from gem_sandbox.sandbox.errors import SandboxUnavailable

UIDS_PER_SANDBOX = 64  # concurrent runs, kernels and shells in one sandbox
FIRST_UID = 10_000_000
BLOCK_UIDS = 1_000_000  # one host process's
SLOT_UIDS = 1000  # one sandbox's (of which it uses the first UIDS_PER_SANDBOX)
BLOCKS = 4000  # the last uid stays below 2**32 - 1, which the kernel reserves
SLOTS = BLOCK_UIDS // SLOT_UIDS
# One directory for every process on the host, whatever its user or TMPDIR: /run/lock is a
# sticky world-writable tmpfs for lock files where there is one (no age-based cleaning).
LOCK_DIR = os.path.join("/run/lock" if os.path.isdir("/run/lock") else "/tmp", "gem-sandbox-uids")


class UidRange:
    """One sandbox's uids, :attr:`base` to ``base + count - 1``, its own until :meth:`release`."""

    def __init__(self, owner: UidRanges, block: int, slot: int) -> None:
        self.base = FIRST_UID + block * BLOCK_UIDS + slot * SLOT_UIDS
        self.count = UIDS_PER_SANDBOX
        self._owner = owner
        self._place = (block, slot)
        self._pid = os.getpid()
        self._released = False

    def release(self) -> None:
        """Give the range back; call it once nothing of the sandbox can still run. Idempotent
        (and a no-op in a forked child: the range is its parent's)."""
        if not self._released and self._pid == os.getpid():
            self._released = True
            self._owner._free_slot(self._place)


class UidRanges:
    """Hands out :class:`UidRange` s from blocks this process holds; thread-safe. The module's
    :func:`claim_uid_range` uses one for :data:`LOCK_DIR`; tests make small ones."""

    def __init__(
        self, lock_dir: str = LOCK_DIR, *, blocks: int = BLOCKS, slots: int = SLOTS
    ) -> None:
        self.lock_dir = lock_dir
        self._nblocks, self._nslots = blocks, slots
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # block -> the descriptor holding its lock
        self._free: collections.deque[tuple[int, int]] = collections.deque()
        os.register_at_fork(after_in_child=functools.partial(_forget_in_child, weakref.ref(self)))

    def claim(self) -> UidRange:
        """A free range, from a newly claimed block when this process's are full; raises
        :class:`SandboxUnavailable` when every block is held and every slot in use."""
        with self._lock:
            if not self._free:
                self._claim_block()
            return UidRange(self, *self._free.popleft())

    def blocks(self) -> list[int]:
        """The blocks this process holds."""
        with self._lock:
            return sorted(self._held)

    def in_use(self) -> int:
        """How many ranges are handed out and not released."""
        with self._lock:
            return len(self._held) * self._nslots - len(self._free)

    def _free_slot(self, place: tuple[int, int]) -> None:
        with self._lock:
            if place[0] in self._held:
                self._free.append(place)

    def _forget(self) -> None:
        """In a forked child: the inherited descriptors' blocks stay the parent's (closing our
        copies leaves the parent's locks; an unlock would not), and so do its ranges. A new
        lock, too: another thread may have held ours at the fork."""
        self._lock = threading.Lock()
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()
        self._free.clear()

    def _claim_block(self) -> None:
        dir_fd = self._open_dir()
        try:
            for block in range(self._nblocks):
                if block not in self._held:
                    fd = _lock(dir_fd, f"block-{block}.lock")
                    if fd is not None:
                        self._held[block] = fd
                        self._free.extend((block, slot) for slot in range(self._nslots))
                        return
        except OSError as exc:
            raise SandboxUnavailable(
                f"cannot lock a uid block in {self.lock_dir} ({exc}); it must be a directory "
                "this process can create files in"
            ) from exc
        finally:
            os.close(dir_fd)
        mine = len(self._held)
        raise SandboxUnavailable(
            f"no uid range is free: every slot of this process's {mine} uid blocks has a live "
            f"sandbox and other live processes hold the other {self._nblocks - mine} (lock "
            f"files in {self.lock_dir}); close sandboxes, or end processes that hold blocks"
        )

    def _open_dir(self) -> int:
        """The lock directory, made sticky and world-writable (any user may run sandboxes),
        refused when someone other than root or us owns it: they could remove held locks."""
        try:
            os.mkdir(self.lock_dir, 0o1777)
            os.chmod(self.lock_dir, 0o1777)  # past the umask
        except OSError:
            pass  # there already, or not ours to make: the open says which
        try:
            fd = os.open(self.lock_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise SandboxUnavailable(
                f"cannot open {self.lock_dir} for uid block locks ({exc}); it must be a "
                "directory this process can create files in"
            ) from exc
        info = os.fstat(fd)
        if info.st_uid not in (0, os.geteuid()) or (
            info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX
        ):
            os.close(fd)
            raise SandboxUnavailable(
                f"{self.lock_dir} (uid block locks) is owned by uid {info.st_uid} or writable "
                "by all without the sticky bit: others could remove held locks; remove it"
            )
        return fd


def _forget_in_child(ranges: weakref.ref[UidRanges]) -> None:
    alive = ranges()
    if alive is not None:
        alive._forget()


def _lock(dir_fd: int, name: str) -> int | None:
    """A descriptor holding an exclusive lock on ``name``, or ``None`` when its block is
    someone else's: another process holds the lock, or the file is another user's (whom we
    cannot read, or who could remove it while we hold it)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC  # flock needs no write access
    while True:
        created = False
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            try:
                fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                continue  # another process made it first
            created = True
        except PermissionError:
            return None
        try:
            info = os.fstat(fd)
            if info.st_uid not in (0, os.geteuid()):
                os.close(fd)
                return None
            if created:
                os.fchmod(fd, 0o644)  # past the umask: other users lock it too
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ino == info.st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # removed or replaced between our open and our lock: lock the new one


_ranges = UidRanges()


def claim_uid_range() -> UidRange:
    """A uid range no other live sandbox on this host uses (see the module docstring)."""
    return _ranges.claim()


def live_uid_ranges() -> int:
    """How many of :func:`claim_uid_range`'s ranges this process has not got back."""
    return _ranges.in_use()
