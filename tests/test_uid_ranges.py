"""Uid ranges: no two live sandboxes on a host share a uid, whichever processes made them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gem_sandbox.sandbox.backends.local import ProcessBackend
from gem_sandbox.sandbox.backends.uids import (
    BLOCK_UIDS,
    FIRST_UID,
    SLOT_UIDS,
    UIDS_PER_SANDBOX,
    UidRanges,
    claim_uid_range,
    live_uid_ranges,
)
from gem_sandbox.sandbox.client import open_sandbox
from gem_sandbox.sandbox.errors import SandboxUnavailable
from tests.sandbox_fixtures import SPEC, make_backend

HOLDER = textwrap.dedent(
    """
    import sys
    from gem_sandbox.sandbox.backends.uids import UidRanges, claim_uid_range
    ranges = UidRanges(sys.argv[1]) if sys.argv[1] != "-" else None
    uids = ranges.claim() if ranges else claim_uid_range()
    print(uids.base, flush=True)
    sys.stdin.read()  # hold the block until the parent closes our stdin
    """
)


def block_of(base: int) -> int:
    return (base - FIRST_UID) // BLOCK_UIDS


class Holder:
    """Another process that claimed a uid range and holds it until :meth:`stop`."""

    def __init__(self, lock_dir: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, lock_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base = int(self.process.stdout.readline())

    def stop(self) -> None:
        self.process.communicate(timeout=10)


@pytest.fixture
def lock_dir(tmp_path: Path) -> str:
    return str(tmp_path / "uid-blocks")


def test_another_process_holding_a_block_makes_us_take_the_next(lock_dir: str):
    holder = Holder(lock_dir)
    try:
        ours = UidRanges(lock_dir).claim()
        assert block_of(holder.base) == 0
        assert block_of(ours.base) == 1
    finally:
        holder.stop()


def test_a_block_is_free_again_once_its_process_is_gone(lock_dir: str):
    holder = Holder(lock_dir)
    holder.stop()
    assert block_of(UidRanges(lock_dir).claim().base) == 0


def test_the_host_wide_allocator_never_gives_two_processes_the_same_block():
    holder = Holder("-")
    try:
        ours = claim_uid_range()
        assert block_of(ours.base) != block_of(holder.base)
        ours.release()
    finally:
        holder.stop()


def test_live_ranges_do_not_overlap_and_fit_their_slots(lock_dir: str):
    ranges = UidRanges(lock_dir, slots=3)
    bases = [ranges.claim().base for _ in range(3)]
    assert bases == [FIRST_UID, FIRST_UID + SLOT_UIDS, FIRST_UID + 2 * SLOT_UIDS]
    assert UIDS_PER_SANDBOX <= SLOT_UIDS


def test_a_released_slot_is_handed_out_again(lock_dir: str):
    ranges = UidRanges(lock_dir, slots=2)
    first, second = ranges.claim(), ranges.claim()
    first.release()
    assert ranges.claim().base == first.base
    assert ranges.blocks() == [0]
    second.release()


def test_releasing_twice_frees_the_slot_once(lock_dir: str):
    ranges = UidRanges(lock_dir, slots=2)
    first = ranges.claim()
    first.release()
    first.release()
    a, b = ranges.claim(), ranges.claim()
    assert a.base != b.base


def test_a_process_whose_slots_are_full_claims_another_block(lock_dir: str):
    ranges = UidRanges(lock_dir, slots=1)
    first, second = ranges.claim(), ranges.claim()
    assert [block_of(first.base), block_of(second.base)] == [0, 1]
    assert ranges.blocks() == [0, 1]


def test_when_every_block_and_slot_is_in_use_claiming_raises_unavailable(lock_dir: str):
    holder = Holder(lock_dir)
    try:
        ranges = UidRanges(lock_dir, blocks=2, slots=1)
        ranges.claim()
        with pytest.raises(SandboxUnavailable, match="no uid range is free"):
            ranges.claim()
    finally:
        holder.stop()


def test_a_forked_child_does_not_take_its_parents_block(lock_dir: str):
    ranges = UidRanges(lock_dir)
    ours = ranges.claim()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the block it got, then leave at once
        try:
            os.write(write_end, str(ranges.claim().base).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        childs = int(pipe.read())
    os.waitpid(pid, 0)
    assert block_of(childs) != block_of(ours.base)
    assert ranges.claim().base == ours.base + SLOT_UIDS  # the parent's block is still its own


@pytest.mark.anyio
@pytest.mark.parametrize(
    "name", ["local", "process", pytest.param("docker", marks=pytest.mark.docker)]
)
async def test_a_sandbox_runs_in_its_own_range_and_gives_it_back_when_closed(name: str):
    if os.geteuid() != 0:
        pytest.skip("sandboxes get uid ranges only when started by root")
    backend = ProcessBackend() if name == "process" else make_backend(name)
    before = live_uid_ranges()
    try:
        async with open_sandbox(backend, SPEC) as sb:
            uid = int((await sb.run("import os; print(os.getuid())")).stdout)
            assert live_uid_ranges() == before + 1
            assert (uid - FIRST_UID) % SLOT_UIDS < UIDS_PER_SANDBOX
    finally:
        await backend.aclose()
    assert live_uid_ranges() == before
