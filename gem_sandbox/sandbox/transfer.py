"""Files to and from the agent: the uncompressed tar streams of ``write_files`` and
``read_files``, checked before anything is sent.

Packing and unpacking are CPU work on the event loop that every sandbox shares, so a large
archive is handled on a worker thread. On a 2-core host a thread hop costs about 160 us;
tar work costs about 25 us a file plus about 150 us a MiB. Below :data:`OFF_LOOP_FILES`
files and :data:`OFF_LOOP_BYTES` the work is about one hop or less and is done in place (the
loop stalls well under a millisecond); above either, the hop is cheaper than the stall (8 MiB
is about 1 ms, 100 small files about 2.5 ms).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

import anyio.to_thread

from gem_sandbox.agent import protocol
from gem_sandbox.sandbox.errors import UnsafePath

OFF_LOOP_BYTES = 1024 * 1024  # file bytes past which tar work leaves the event loop
OFF_LOOP_FILES = 8  # files past which tar work leaves the event loop
FILE_MODE = 0o664  # of files written into the work dir
EXEC_MODE = 0o775  # of the files a write names as executable

_T = TypeVar("_T")


def check_path(path: str) -> None:
    """Raise :class:`UnsafePath` for a path the agent would refuse (absolute, empty, climbing
    out with ``..``), before anything is sent: the agent's own rule, applied here first."""
    try:
        protocol.split_path(path)
    except protocol.Refused as exc:
        raise UnsafePath(str(exc)) from None


async def pack(
    files: Mapping[str, bytes | str], executable: Collection[str] = (), directories: Collection[str] = ()
) -> bytes:
    """A tar stream of ``directories`` (made first, empty or not) and ``files`` (path ->
    content; text is written as UTF-8); the paths in ``executable`` get the exec bits."""
    files = dict(files)  # a copy: other tasks may change theirs while a worker thread packs
    for path in [*directories, *files]:
        check_path(path)
    size = sum(len(content) for content in files.values())
    work = (files, frozenset(executable), tuple(directories))
    return await _in_place_or_off_loop(size, len(files) + len(directories), _pack, *work)


async def unpack(archive: bytes, paths: Sequence[str]) -> dict[str, bytes]:
    """The regular files in a tar stream the agent sent for ``paths``, by path."""
    return await _in_place_or_off_loop(len(archive), len(paths), _unpack, archive)


async def _in_place_or_off_loop(
    size: int, count: int, work: Callable[..., _T], *args: object
) -> _T:
    if size > OFF_LOOP_BYTES or count > OFF_LOOP_FILES:
        return await anyio.to_thread.run_sync(work, *args)
    return work(*args)


def _pack(files: Mapping[str, bytes | str], executable: frozenset[str], directories: Sequence[str]) -> bytes:
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for path in directories:
            info = tarfile.TarInfo(path)
            info.type = tarfile.DIRTYPE
            info.mode = EXEC_MODE
            tar.addfile(info)
        for path, content in files.items():
            data = protocol.text_bytes(content) if isinstance(content, str) else bytes(content)
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = EXEC_MODE if path in executable else FILE_MODE
            tar.addfile(info, io.BytesIO(data))
    return archive.getvalue()


def _unpack(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
