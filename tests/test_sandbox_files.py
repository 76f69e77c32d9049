"""File transfer: files go in and out of the work dir, never through links or to elsewhere."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from gem_sandbox.agent import files
from gem_sandbox.agent.protocol import Refused
from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import AgentError, FileTransferError, UnsafePath
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import HOST_BACKENDS, sandbox  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio


async def test_written_files_read_back_byte_for_byte(sandbox: Sandbox):
    await sandbox.write_files({"a.txt": "text é", "deep/dir/b.bin": bytes(range(256))})
    assert await sandbox.read_files(["a.txt", "deep/dir/b.bin"]) == {
        "a.txt": "text é".encode(),
        "deep/dir/b.bin": bytes(range(256)),
    }


async def test_write_under_a_destination_dir(sandbox: Sandbox):
    await sandbox.write_files({"x.py": "print(1)"}, dest="pkg")
    assert (await sandbox.run("print(open('pkg/x.py').read())")).stdout == "print(1)\n"


@pytest.mark.parametrize("sandbox", HOST_BACKENDS, indirect=True)  # e2b's own /home/user is its own
async def test_e2b_home_dir_is_the_work_dir(sandbox: Sandbox):
    await sandbox.write_files({"note.txt": "hi\n"})
    result = await sandbox.run("cat /home/user/note.txt && cd /home/user && pwd && touch made && ls /work", "bash")
    assert result.stdout.split() == ["hi", "/home/user", "made", "note.txt"]


async def test_written_files_can_carry_user_extended_attributes(sandbox: Sandbox):
    show = "import os; print(sorted((n, os.getxattr('f.txt', n)) for n in os.listxattr('f.txt')))"
    await sandbox.write_files({"f.txt": "1"}, xattrs={"user.a": "x", "user.b": "y"})
    assert (await sandbox.run(show)).stdout == "[('user.a', b'x'), ('user.b', b'y')]\n"
    await sandbox.write_files({"f.txt": "2"})  # None: left as they are
    assert (await sandbox.run(show)).stdout == "[('user.a', b'x'), ('user.b', b'y')]\n"
    await sandbox.write_files({"f.txt": "3"}, xattrs={"user.b": "z"})  # the others go
    assert (await sandbox.run(show)).stdout == "[('user.b', b'z')]\n"
    with pytest.raises(AgentError, match="user"):
        await sandbox.write_files({"f.txt": "4"}, xattrs={"trusted.x": "no"})


async def test_executables_and_empty_directories_are_written_as_named(sandbox: Sandbox):
    await sandbox.write_files(
        {"bin/run.sh": "#!/bin/sh\necho ran\n", "notes.txt": "n"},
        executable=["bin/run.sh"],
        directories=["empty/inner", "bin"],
    )
    result = await sandbox.run("./bin/run.sh && test ! -x notes.txt && test -d empty/inner && ls -A empty/inner", "bash")
    assert (result.status, result.stdout) == (Status.OK, "ran\n")


async def test_runs_can_change_written_files_and_dirs(sandbox: Sandbox):
    await sandbox.write_files({"d/f.txt": "v1"})
    result = await sandbox.run(
        "open('d/f.txt', 'a').write('+v2'); open('d/new.txt', 'w').write('n')"
    )
    assert result.status is Status.OK
    assert await sandbox.read_files(["d/f.txt", "d/new.txt"]) == {
        "d/f.txt": b"v1+v2",
        "d/new.txt": b"n",
    }


async def test_files_written_by_one_run_can_be_changed_by_the_next(sandbox: Sandbox):
    await sandbox.run("import os; os.makedirs('out'); open('out/r.txt', 'w').write('1')")
    assert (await sandbox.run("open('out/r.txt', 'a').write('2'); open('out/s.txt', 'w')")).ok
    assert (await sandbox.read_files(["out/r.txt"]))["out/r.txt"] == b"12"


@pytest.mark.parametrize("path", ["/etc/passwd", "../escape", "a/../../escape", ""])
async def test_unsafe_paths_are_refused_before_sending(sandbox: Sandbox, path: str):
    with pytest.raises(UnsafePath):
        await sandbox.write_files({path: "x"})
    with pytest.raises(UnsafePath):
        await sandbox.read_files([path])


async def test_reading_through_a_symlink_made_by_sandbox_code_is_refused(sandbox: Sandbox):
    await sandbox.run("import os; os.symlink('/etc/passwd', 'leak'); os.symlink('/etc', 'etc')")
    with pytest.raises(UnsafePath):
        await sandbox.read_files(["leak"])
    with pytest.raises(UnsafePath):
        await sandbox.read_files(["etc/passwd"])


async def test_writing_through_a_symlink_made_by_sandbox_code_is_refused(sandbox: Sandbox):
    await sandbox.run("import os; os.symlink('/tmp', 'out'); os.symlink('/tmp/target', 'file')")
    with pytest.raises(UnsafePath):
        await sandbox.write_files({"ok.txt": "x", "out/evil.txt": "x"})
    with pytest.raises(UnsafePath):
        await sandbox.write_files({"file": "x"})
    listing = await sandbox.run(
        "import os; print(sorted(os.listdir('.')), [os.path.exists(p) for p in ('/tmp/evil.txt', '/tmp/target')])"
    )
    assert listing.stdout == "['file', 'out'] [False, False]\n"  # nothing was written, not even ok.txt


async def test_reading_a_fifo_or_a_directory_is_refused(sandbox: Sandbox):
    await sandbox.run("import os; os.mkfifo('pipe'); os.mkdir('dir')")
    for path in ("pipe", "dir"):
        with pytest.raises(FileTransferError, match="not a regular file"):
            await sandbox.read_files([path])


async def test_reading_a_missing_file_raises(sandbox: Sandbox):
    await sandbox.write_files({"here.txt": "x"})
    with pytest.raises(FileTransferError, match="missing.txt"):
        await sandbox.read_files(["here.txt", "missing.txt"])


# The agent's own checks, for tar streams the client would never build.


def tar_of(*members: tarfile.TarInfo) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return out.getvalue()


def member(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 1, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return info


@pytest.mark.parametrize(
    "bad",
    [
        member("link", tarfile.SYMTYPE, link="/etc/passwd"),
        member("hard", tarfile.LNKTYPE, link="/etc/passwd"),
        member("dev", tarfile.CHRTYPE),
        member("fifo", tarfile.FIFOTYPE),
        member("/abs"),
        member("../up"),
    ],
    ids=["symlink", "hardlink", "device", "fifo", "absolute", "dotdot"],
)
def test_agent_refuses_unsafe_tar_members_and_writes_nothing(tmp_path, bad: tarfile.TarInfo):
    with pytest.raises(Refused) as refused:
        files.write_tar(str(tmp_path), ".", tar_of(member("fine.txt"), bad), gid=None)
    assert refused.value.kind == "unsafe_path"
    assert os.listdir(tmp_path) == []


def test_agent_caps_the_total_size_read(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 600)
    (tmp_path / "b").write_bytes(b"x" * 600)
    with pytest.raises(Refused, match="limit") as refused:
        files.read_tar(str(tmp_path), ["a", "b"], max_bytes=1000)
    assert refused.value.kind == "file_error"
