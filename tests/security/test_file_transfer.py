"""``write_files`` and ``read_files`` never leave the work dir and never follow what sandbox
code planted: bad paths and planted links, fifos and devices raise typed errors (promptly),
and nothing outside the work dir is read or changed on the caller's behalf."""

from __future__ import annotations

import io
import tarfile

import pytest

from gem_sandbox.sandbox.client import Sandbox
from gem_sandbox.sandbox.errors import AgentError, FileTransferError, UnsafePath
from tests.security.harness import S, Context, case

pytestmark = pytest.mark.anyio

REFUSED = (UnsafePath, FileTransferError)


async def plant(sb: Sandbox, code: str) -> None:
    result = await sb.run(code, timeout=5)
    assert result.status is S.OK, f"planting failed: {result!r}"


async def untouched(sb: Sandbox, path: str, content: str) -> None:
    """``path`` (outside the work dir) still holds exactly ``content``."""
    result = await sb.run(f"print(open({path!r}).read(), end='')", timeout=5)
    assert (result.status, result.stdout) == (S.OK, content), f"{path} was changed through a link: {result!r}"


def writer(files: dict[str, str], dest: str = "."):
    async def act(sb: Sandbox, ctx: Context) -> None:
        await sb.write_files(files, dest=dest)

    return act


def reader(paths: list[str]):
    async def act(sb: Sandbox, ctx: Context) -> None:
        await sb.read_files(paths)

    return act


BAD_PATHS = [
    case("write_dot_dot", "action", writer({"../x": "pwned"}), raises=REFUSED, may_return=False),
    case("write_nested_dot_dot", "action", writer({"a/../../x": "pwned"}), raises=REFUSED, may_return=False),
    case("write_absolute", "action", writer({"/tmp/x": "pwned"}), raises=REFUSED, may_return=False),
    case("write_nul_in_name", "action", writer({"a\0b": "pwned"}), raises=REFUSED, may_return=False),
    case("write_dest_outside", "action", writer({"x": "pwned"}, dest="../tmp"), raises=REFUSED, may_return=False),
    case("read_dot_dot", "action", reader(["../etc/passwd"]), raises=REFUSED, may_return=False),
    case("read_absolute", "action", reader(["/etc/passwd"]), raises=REFUSED, may_return=False),
    case("read_nul_in_name", "action", reader(["a\0b"]), raises=REFUSED, may_return=False),
]


@pytest.mark.parametrize("case", BAD_PATHS)
async def test_paths_outside_the_work_dir_are_refused(harness, case):
    await harness.verify(case)


async def _newline_name(sb: Sandbox, ctx: Context) -> None:
    name = "new\nline.txt"
    try:
        await sb.write_files({name: "data"})
    except REFUSED:
        return
    got = await sb.read_files([name])
    assert got == {name: b"data"}, f"a name with a newline came back as {got!r}"


async def _symlink_read(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; os.symlink('/etc/passwd', 'link')")
    await sb.read_files(["link"])


async def _symlink_to_device_read(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; os.symlink('/dev/zero', 'zero'); os.symlink('/proc/1/environ', 'environ')")
    for path in ("zero", "environ"):
        with pytest.raises(REFUSED):
            await sb.read_files([path])


async def _symlink_write(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; open('/tmp/target', 'w').write('orig'); os.symlink('/tmp/target', 'link')")
    try:
        await sb.write_files({"link": "pwned"})
    except REFUSED:
        pass
    await untouched(sb, "/tmp/target", "orig")


async def _symlinked_dir_write(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; open('/tmp/inside', 'w').write('orig'); os.symlink('/tmp', 'dir')")
    try:
        await sb.write_files({"dir/inside": "pwned", "dir/new": "pwned"})
    except REFUSED:
        pass
    await untouched(sb, "/tmp/inside", "orig")
    result = await sb.run("import os; print(os.path.exists('/tmp/new'))", timeout=5)
    assert result.stdout == "False\n", f"a file was written through a symlinked directory: {result!r}"


async def _symlinked_dir_read(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; open('/tmp/secret', 'w').write('secret'); os.symlink('/tmp', 'dir')")
    await sb.read_files(["dir/secret"])


async def _hardlink_read(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; open('a', 'w').write('A'); os.link('a', 'b')")
    try:
        got = await sb.read_files(["b"])
    except REFUSED:
        return
    assert got == {"b": b"A"}, f"{got!r}"


async def _hardlink_write(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; open('a', 'w').write('A'); os.link('a', 'b')")
    try:
        await sb.write_files({"b": "B"})
    except REFUSED:
        return
    await untouched(sb, "/work/a", "A")


async def _fifo_read(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; os.mkfifo('fifo')")
    await sb.read_files(["fifo"])


async def _fifo_write(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "import os; os.mkfifo('fifo')")
    try:
        await sb.write_files({"fifo": "data"})
    except REFUSED:
        return
    result = await sb.run("import os, stat; print(stat.S_ISREG(os.lstat('fifo').st_mode))", timeout=5)
    assert result.stdout == "True\n", f"{result!r}"


async def _huge_read(sb: Sandbox, ctx: Context) -> None:
    await plant(sb, "f = open('huge', 'wb'); f.truncate(48 * 2 ** 20)")
    await sb.read_files(["huge"])


PLANTED = [
    case("name_with_a_newline", "action", _newline_name, raises=REFUSED),
    case("read_through_a_planted_symlink", "action", _symlink_read, raises=REFUSED, may_return=False),
    case("read_through_symlinks_to_devices_and_proc", "action", _symlink_to_device_read),
    case("write_through_a_planted_symlink", "action", _symlink_write),
    case("write_through_a_planted_symlinked_dir", "action", _symlinked_dir_write),
    case("read_through_a_planted_symlinked_dir", "action", _symlinked_dir_read, raises=REFUSED, may_return=False),
    case("read_a_planted_hardlink", "action", _hardlink_read),
    case("write_a_planted_hardlink", "action", _hardlink_write),
    case("read_a_planted_fifo", "action", _fifo_read, raises=REFUSED, may_return=False),
    case("write_over_a_planted_fifo", "action", _fifo_write, raises=REFUSED),
    case("read_a_file_over_the_read_limit", "action", _huge_read, raises=REFUSED, may_return=False),
]


@pytest.mark.parametrize("case", PLANTED)
async def test_links_fifos_and_huge_files_planted_by_code_are_never_followed(harness, case):
    await harness.verify(case)


async def _many_members(sb: Sandbox, ctx: Context) -> None:
    files = {f"bomb/{i // 1000}/{i}": b"" for i in range(20000)}
    try:
        await sb.write_files(files)
    except REFUSED:
        pass
    assert (await sb.run("print('alive')", timeout=5)).stdout == "alive\n"


async def _over_the_work_dir(sb: Sandbox, ctx: Context) -> None:
    await sb.write_files({"big": b"\0" * (80 * 2 ** 20)})  # the work dir holds 64 MiB


def _raw_tar(build) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        build(tar)
    return out.getvalue()


async def _send_raw_tar(sb: Sandbox, data: bytes) -> None:
    """A tar stream as a client other than ours might send it (the agent must check it)."""
    try:
        await sb._request({"op": "write_files", "dest": "."}, data, wait=10)
    except AgentError as exc:
        assert exc.kind == "bad_request", f"the agent failed on a bad tar: {exc}"
        raise


def _declared_huge(sb: Sandbox, ctx: Context):
    info = tarfile.TarInfo("huge")
    info.size = 10**12
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    return _send_raw_tar(sb, header + b"\0" * 1024)


def _member(kind: str):
    def build(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(kind)
        if kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        elif kind == "hardlink":
            info.type, info.linkname = tarfile.LNKTYPE, "/etc/passwd"
        elif kind == "device":
            info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 1
        elif kind == "fifo":
            info.type = tarfile.FIFOTYPE
        elif kind == "absolute":
            info.name = "/tmp/absolute"
        elif kind == "traversal":
            info.name = "../../tmp/traversal"
        tar.addfile(info, io.BytesIO(b""))

    async def act(sb: Sandbox, ctx: Context) -> None:
        await _send_raw_tar(sb, _raw_tar(build))

    return act


TAR_ERRORS = (UnsafePath, FileTransferError, AgentError)

TARS = [
    case("tar_with_twenty_thousand_members", "action", _many_members),
    case("write_more_than_the_work_dir_holds", "action", _over_the_work_dir, raises=REFUSED, may_return=False),
    case("tar_member_declaring_a_terabyte", "action", _declared_huge, raises=TAR_ERRORS, may_return=False),
    case("tar_symlink_member", "action", _member("symlink"), raises=TAR_ERRORS, may_return=False),
    case("tar_hardlink_member", "action", _member("hardlink"), raises=TAR_ERRORS, may_return=False),
    case("tar_device_member", "action", _member("device"), raises=TAR_ERRORS, may_return=False),
    case("tar_fifo_member", "action", _member("fifo"), raises=TAR_ERRORS, may_return=False),
    case("tar_absolute_member", "action", _member("absolute"), raises=TAR_ERRORS, may_return=False),
    case("tar_traversal_member", "action", _member("traversal"), raises=TAR_ERRORS, may_return=False),
]


@pytest.mark.parametrize("case", TARS)
async def test_tar_bombs_and_forbidden_members_are_refused_or_contained(harness, case):
    await harness.verify(case)
