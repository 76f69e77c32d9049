"""Removing what runs wrote, without stalling the agent.

A run may leave a million empty files, a directory of 200k links or a tree 10k levels deep.
Removing that takes seconds, and meanwhile the agent must answer pings and send verdicts. So a
small tree (what nearly every run leaves: a script, a binary) is removed in place, and a large
one by a forked helper the agent awaits like any child. A helper is a process rather than a
thread because the agent forks (helpers, and in token mode runs): a fork taken while another
thread of it held a lock would hand the child that lock, held forever.

A helper is exempt from kills (:meth:`.tenants.Tenants.born`): it runs no user code.
"""

import os
import signal

from . import aio

SMALL = 64  # entries a directory may hold, none of them a directory, to be emptied in place
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Sweeper:
    """Empties and removes directories; remembers the helpers still at it."""

    def __init__(self, loop, reaper, tenants):
        self.loop = loop
        self.reaper = reaper
        self.tenants = tenants
        self.pending = {}  # the future of each helper still removing -> its pid

    @property
    def busy(self):
        return bool(self.pending)

    def remove(self, paths):
        """Remove ``paths`` (dirs the agent made) with everything in them; a future that is
        True once all are gone."""
        return self._sweep(paths, remove_tree)

    def empty(self, paths):
        """Empty ``paths``, keeping the dirs themselves; a future like :meth:`remove`'s."""
        return self._sweep(paths, empty_dir)

    def stop(self):
        """Kill the helpers still removing: the agent is stopping, and they must not outlive
        it (the sandbox's dirs go with the sandbox)."""
        for pid in self.pending.values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def settle(self, patience):
        """Wait up to ``patience`` seconds for the helpers still removing; True once none
        is left."""
        if self.pending:
            await aio.wait(list(self.pending), timeout=patience)
        return not self.pending

    def _sweep(self, paths, how):
        done = self.loop.create_future()
        # What fails in place (a file code made unremovable) a helper tries again.
        large = [path for path in paths if not (_small(path) and _in_place([path], how))]
        if not large:
            done.set_result(True)
            return done
        try:
            pid = os.fork()
        except OSError:  # no process slot (what runs left is being killed): in place, then
            done.set_result(_in_place(large, how))
            return done
        if pid == 0:
            _helper(large, how)
        exited = self.reaper.watch(pid)
        self.tenants.born(pid, exited)
        self.pending[done] = pid

        def finished(future):
            del self.pending[done]
            status, _ = future.result()
            done.set_result(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0)

        exited.add_done_callback(finished)
        return done


def _small(path):
    """Whether ``path`` is a directory of few entries and no subdirectory (reading only
    the first of its entries, however many it has), or is not there at all."""
    try:
        with os.scandir(path) as entries:
            for count, entry in enumerate(entries):
                if count >= SMALL or entry.is_dir(follow_symlinks=False):
                    return False
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _in_place(paths, how):
    """Apply ``how`` to each of ``paths``; whether all went (a missing one counts as gone)."""
    try:
        for path in paths:
            try:
                how(path)
            except FileNotFoundError:
                pass
    except OSError:
        return False
    return True


def _helper(paths, how):
    """The forked helper: remove, and say by the exit status whether all went."""
    code = 1
    try:
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the agent's stream is not its to hold
        code = 0 if _in_place(paths, how) else 1
    finally:
        os._exit(code)


def remove_tree(path):
    """Remove ``path`` and everything in it, if it is there."""
    try:
        empty_dir(path)
        os.rmdir(path)
    except FileNotFoundError:
        pass


def empty_dir(path):
    """Remove everything inside ``path``, following no link, in time linear in the number
    of entries whatever the tree's shape (each directory is read once: a directory of 100k
    subdirectories is not read again after each of them), holding one descriptor and no
    recursion whatever its depth. Runs only once the tree's writers are dead, so ``..``
    leads back the way it came."""
    fd = os.open(path, _DIR_FLAGS)
    below = []  # the names from ``path`` down to ``fd``
    try:
        todo = [_clear_files(fd)]  # per level, the subdirectories still to visit
        while todo:
            if todo[-1]:
                name = todo[-1].pop()
                os.chmod(name, 0o700, dir_fd=fd)  # code may have taken its own access away
                step = os.open(name, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = step
                below.append(name)
                todo.append(_clear_files(fd))
                continue
            todo.pop()
            if below:
                step = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = step
                os.rmdir(below.pop(), dir_fd=fd)
    finally:
        os.close(fd)


def _clear_files(fd):
    """Unlink everything in the open directory ``fd`` but its subdirectories that are not
    empty (an empty one goes in one call, as a flood of ``mkdir`` leaves them); their names."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.name, dir_fd=fd)
                continue
            try:
                os.rmdir(entry.name, dir_fd=fd)
            except OSError:  # not empty
                subdirs.append(entry.name)
    return subdirs
