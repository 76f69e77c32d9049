"""The e2b backend against e2b's cloud. These run only where ``E2B_API_KEY`` is set (the
project's machines cannot reach e2b, so CI skips them, and does not count them); the same
behaviours run against the service's own e2b-compatible endpoint in
tests/test_service_e2b_commands.py."""

from __future__ import annotations

import os

import e2b
import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox.backends.e2b import OWNER_KEY, E2BBackend
from gem_sandbox.sandbox.backends.owners import owner_id
from gem_sandbox.sandbox.result import Status

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not os.environ.get("E2B_API_KEY"), reason="needs E2B_API_KEY and e2b's cloud"),
]


async def test_runs_leases_and_timeouts_on_e2b() -> None:
    async with Runtime(E2BBackend(), max_size=1, min_idle=1) as runtime:
        assert (await runtime.run("print(6 * 7)")).stdout == "42\n"
        async with runtime.lease() as sandbox:
            await sandbox.shell("cd /tmp && export A=1")
            assert (await sandbox.shell("pwd; echo $A")).stdout == "/tmp\n1\n"
            assert (await sandbox.run("import time; time.sleep(5)", timeout=1)).status is Status.TIMEOUT


async def test_closing_the_runtime_leaves_no_sandbox_of_ours() -> None:
    async with Runtime(E2BBackend(), max_size=1, min_idle=1) as runtime:
        await runtime.wait_ready()
    mine = e2b.SandboxQuery(metadata={OWNER_KEY: owner_id()})
    assert await e2b.AsyncSandbox.list(query=mine).next_items() == []
