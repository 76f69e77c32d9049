"""Files in and out of the work dir, never through a link that sandbox code made.

Every path is walked one component at a time from an open directory with ``O_NOFOLLOW``, so
a symlink planted by code in the sandbox (or a directory swapped for one) cannot send a
write or a read outside the work dir. Only regular files and directories cross: links,
devices and fifos are refused. Files arrive and leave as uncompressed tar streams.
"""

import errno
import io
import os
import stat

from .protocol import Refused, split_path

MAX_READ_BYTES = 32 * 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def write_tar(root, dest, data, gid, xattrs=None):
    """Unpack a tar stream under ``root/dest``; returns the paths written. Every member and
    every existing path on the way is checked before anything is written. ``xattrs``
    (``{name: value}``, names in the ``user.`` namespace) become each written file's
    ``user.*`` extended attributes, any others it had removed; None leaves them alone."""
    import tarfile  # here: an idle sandbox is 1.2 MB smaller without it

    base = split_path(dest) if dest not in ("", ".") else []
    if xattrs is not None and not all(
        isinstance(k, str) and k.startswith("user.") and isinstance(v, str) for k, v in xattrs.items()
    ):
        raise Refused("bad_request", "xattrs must map user.* names to strings")
    try:
        return _unpack(root, base, data, gid, xattrs)
    except tarfile.TarError as exc:
        raise Refused("bad_request", "not a valid uncompressed tar stream: %s" % exc) from None


def _unpack(root, base, data, gid, xattrs):
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        plan = []
        for member in tar.getmembers():
            if not (member.isfile() or member.isdir()):
                raise Refused(
                    "unsafe_path",
                    "%r is a link, device or fifo; only regular files and directories can "
                    "be written" % member.name,
                )
            if member.offset_data + member.size > len(data):
                raise Refused(
                    "bad_request",
                    "%r declares %d bytes the stream does not hold" % (member.name, member.size),
                )
            parts = base + split_path(member.name)
            if parts:
                plan.append((parts, member))
        root_fd = os.open(root, _DIR_FLAGS)
        try:
            for parts, member in plan:
                _check_target(root_fd, parts, member.isdir())
            for parts, member in plan:
                _write_member(root_fd, parts, member, tar, gid, xattrs)
        except OSError as exc:
            raise Refused("file_error", "writing files failed: %s" % exc) from None
        finally:
            os.close(root_fd)
    return ["/".join(parts) for parts, _ in plan]


def read_tar(root, paths, max_bytes=MAX_READ_BYTES):
    """``(missing paths, tar stream of the others)``; refuses links, non-regular files and
    more than ``max_bytes`` in total."""
    import tarfile

    out = io.BytesIO()
    missing = []
    budget = max_bytes
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        with tarfile.open(fileobj=out, mode="w") as tar:
            for path in paths:
                data = _read_file(root_fd, path, budget)
                if data is None:
                    missing.append(path)
                    continue
                budget -= len(data)
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    except OSError as exc:
        raise Refused("file_error", "reading files failed: %s" % exc) from None
    finally:
        os.close(root_fd)
    return missing, out.getvalue()


def _open_dir(parent, name, path):
    """The directory ``name`` in ``parent``; None when missing; refuses links."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _not_plain(parent, name, path, "a directory") from None
        raise


def _not_plain(parent, name, path, wanted):
    mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        return Refused("unsafe_path", "%r is or passes through a symbolic link" % path)
    return Refused(
        "unsafe_path", "%r is or passes through something that is not %s" % (path, wanted)
    )


def _walk(root_fd, parts, path, create, gid=None):
    """An fd of the directory ``parts`` under ``root_fd`` (the caller closes it, unless it
    is ``root_fd``); None when a component is missing and ``create`` is false."""
    fd = root_fd
    for name in parts:
        sub = _open_dir(fd, name, path)
        if sub is None and create:
            os.mkdir(name, 0o2775, dir_fd=fd)
            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
            _share(sub, gid)
        if fd != root_fd:
            os.close(fd)
        if sub is None:
            return None
        fd = sub
    return fd


def _check_target(root_fd, parts, is_dir):
    path = "/".join(parts)
    parent = _walk(root_fd, parts[:-1], path, create=False)
    if parent is None:
        return
    try:
        mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    finally:
        if parent != root_fd:
            os.close(parent)
    if not (stat.S_ISDIR(mode) if is_dir else stat.S_ISREG(mode)):
        raise Refused("unsafe_path", "%r exists and is a link or another kind of file" % path)


def _write_member(root_fd, parts, member, tar, gid, xattrs):
    path = "/".join(parts)
    parent = _walk(root_fd, parts[:-1], path, create=True, gid=gid)
    try:
        if member.isdir():
            sub = _open_dir(parent, parts[-1], path)
            if sub is None:
                os.mkdir(parts[-1], 0o2775, dir_fd=parent)
                sub = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
                _share(sub, gid)
            os.close(sub)
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags, 0o664, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):
                raise _not_plain(parent, parts[-1], path, "a regular file") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                raise Refused("unsafe_path", "%r is not a plain regular file" % path)
            os.ftruncate(fd, 0)
            view = memoryview(tar.extractfile(member).read())
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o775 if member.mode & 0o111 else 0o664)
            _share(fd, gid)
            if xattrs is not None:
                for name in os.listxattr(fd):
                    if name.startswith("user.") and name not in xattrs:
                        os.removexattr(fd, name)
                for name, value in xattrs.items():
                    os.setxattr(fd, name, value.encode())
        finally:
            os.close(fd)
    finally:
        if parent != root_fd:
            os.close(parent)


def _share(fd, gid):
    """Group-own and group-write what the agent writes, so every run's uid can change it."""
    if gid is not None:
        os.fchown(fd, -1, gid)
        os.fchmod(fd, stat.S_IMODE(os.fstat(fd).st_mode) | 0o060)


def _read_file(root_fd, path, budget):
    parts = split_path(path)
    if not parts:
        raise Refused("file_error", "%r is the work dir itself, not a file" % path)
    parent = _walk(root_fd, parts[:-1], path, create=False)
    if parent is None:
        return None
    try:
        try:
            fd = os.open(
                parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
            )
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _not_plain(parent, parts[-1], path, "a regular file") from None
            raise Refused("file_error", "cannot open %r: %s" % (path, exc.strerror)) from None
    finally:
        if parent != root_fd:
            os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("file_error", "%r is not a regular file" % path)
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 1024 * 1024)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > budget:
                raise Refused(
                    "file_error",
                    "reading %r passes the %d byte limit of one read" % (path, MAX_READ_BYTES),
                )
            chunks.append(chunk)
    finally:
        os.close(fd)
