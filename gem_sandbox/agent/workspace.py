"""The work dir, the tmp dirs, and the environment every run starts from."""

import os

from . import aio
from .protocol import Refused

RUN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SWEEP_PATIENCE = 0.5  # seconds a run's verdict waits for its dirs to be removed
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


class Workspace:
    """Owns the directories user code may write to and what a run finds when it starts.

    In uid mode the work dir is ``root:gid`` with mode ``2775`` (group-writable, setgid so
    everything made in it is group-owned) and runs use umask ``002``: files one run (or the
    host) writes can be changed by the next run, though it has another uid. Tmp dirs are
    ``1777`` as usual.
    """

    def __init__(self, config, gid, sweeper):
        self.sweeper = sweeper  # removes large trees off the event loop
        self.workdir = os.path.realpath(config.workdir)
        self.tmpdir = os.path.realpath(config.tmpdir)
        self.scratch = [os.path.realpath(path) for path in config.scratch]
        self.gid = gid
        self.base_env = {
            "PATH": RUN_PATH,
            "HOME": self.workdir,
            "LANG": "C.UTF-8",
            "TMPDIR": self.tmpdir,
            "MALLOC_ARENA_MAX": "2",  # see linux.limit_malloc_arenas
        }
        self.base_env.update((name, str(config.threads)) for name in THREAD_VARS)

    @property
    def tmp_dirs(self):
        return [self.tmpdir] + self.scratch

    def prepare(self):
        """Create the dirs and give them their modes (again, after a reset)."""
        for path in [self.workdir] + self.tmp_dirs:
            os.makedirs(path, exist_ok=True)
        if self.gid is not None:
            os.setgroups([self.gid])  # lets the agent set the setgid bit without CAP_FSETID
            os.chown(self.workdir, 0, self.gid)
            os.chmod(self.workdir, 0o2775)
            for path in self.tmp_dirs:
                os.chmod(path, 0o1777)

    async def sweep(self, paths):
        """Remove a tenant's own dirs; True when they are gone within
        :data:`SWEEP_PATIENCE`, else their removal goes on (and the tenant's verdict
        need not wait for a million files to go)."""
        if not paths:
            return True
        removed = self.sweeper.remove(paths)
        await aio.wait([removed], timeout=SWEEP_PATIENCE)
        return removed.done() and removed.result()

    async def clear(self, patience):
        """Empty the dirs and prepare them again, waiting up to ``patience`` seconds for
        removals still going on and for this one; else ``reset_failed``, and the host
        retires the sandbox (its tmpfs goes with it, all at once)."""
        loop = aio.get_running_loop()
        deadline = loop.time() + patience
        why = "there was more to remove than %.1f s allowed" % patience
        if not await self.sweeper.settle(patience):  # one helper at a time in a tree
            raise Refused("reset_failed", "the work and tmp dirs could not be emptied: " + why)
        emptied = self.sweeper.empty([self.workdir] + self.tmp_dirs)
        await aio.wait([emptied], timeout=max(0.0, deadline - loop.time()))
        if not emptied.done():
            raise Refused("reset_failed", "the work and tmp dirs could not be emptied: " + why)
        if not emptied.result():
            why = "something in them cannot be removed"
            raise Refused("reset_failed", "the work and tmp dirs could not be emptied: " + why)
        self.prepare()

    def private_dir(self, tenant):
        """A new dir in the tmpdir that only ``tenant`` can enter: a shared run's cwd, HOME
        and TMPDIR."""
        path = os.path.join(self.tmpdir, ".gem-home-" + tenant.token)
        os.mkdir(path, 0o700)
        os.chown(path, tenant.uid, tenant.gid)
        return path

    def leftovers(self):
        """Dirs that are not empty (reading one entry of each, however many it holds)."""
        return [path for path in [self.workdir] + self.tmp_dirs if _has_entries(path)]

    def env(self, extra, tenant_env):
        """The base environment, then the request's ``extra``, then the tenant's marks."""
        env = dict(self.base_env)
        for key, value in (extra or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise Refused("bad_request", "env names and values must be strings")
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise Refused("bad_request", "bad env variable %r" % key)
            env[key] = value
        env.update(tenant_env)
        return env

    def resolve_cwd(self, cwd):
        """An existing directory inside the work dir (relative paths are from the work dir)."""
        if not cwd:
            return self.workdir
        path = os.path.realpath(os.path.join(self.workdir, cwd))
        if path != self.workdir and not path.startswith(self.workdir + os.sep):
            raise Refused("unsafe_path", "cwd %r is outside the work dir %s" % (cwd, self.workdir))
        if not os.path.isdir(path):
            raise Refused("bad_request", "cwd %r is not a directory" % cwd)
        return path


def _has_entries(path):
    with os.scandir(path) as entries:
        return next(entries, None) is not None
