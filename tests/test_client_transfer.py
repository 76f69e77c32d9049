"""The host's tar streams for file transfer: files round-trip byte for byte, and a large
archive is packed and unpacked without holding the event loop every sandbox shares."""

from __future__ import annotations

from collections.abc import Awaitable

import anyio
import pytest

from gem_sandbox.sandbox import transfer

pytestmark = pytest.mark.anyio

SMALL = {"a.txt": "text é \udcff", "deep/b.bin": bytes(range(256))}
MANY = {f"d/{i}.txt": f"file {i}" for i in range(2000)}
LARGE = {"big.bin": b"\x01" * (transfer.OFF_LOOP_BYTES + 1)}


@pytest.mark.parametrize("files", [SMALL, MANY, LARGE], ids=["small", "many", "large"])
async def test_files_round_trip_byte_for_byte(files):
    archive = await transfer.pack(files)
    expected = {
        path: content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content
        for path, content in files.items()
    }
    assert await transfer.unpack(archive, list(files)) == expected


async def ticks_during(work: Awaitable[object]) -> int:
    """How many times another task got the event loop while ``work`` ran."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        await anyio.sleep(0)  # the ticker is running
        ticks = 0
        await work
        tg.cancel_scope.cancel()
    return ticks


@pytest.mark.parametrize("files", [MANY, LARGE], ids=["many", "large"])
async def test_a_large_archive_is_packed_and_unpacked_off_the_event_loop(files):
    assert await ticks_during(transfer.pack(files)) > 0
    archive = await transfer.pack(files)
    assert await ticks_during(transfer.unpack(archive, list(files))) > 0
