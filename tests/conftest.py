"""Suite-wide settings.

With ``GEM_SANDBOX_REQUIRE_DOCKER=1`` (set by ``.ci/run``) a Docker test that is skipped
counts as a failure: CI must never pass while the Docker backend went untested.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_DOCKER = os.environ.get("GEM_SANDBOX_REQUIRE_DOCKER") == "1"
if REQUIRE_DOCKER:
    # Docker test modules skip at collection without the SDK, before the hook below sees a
    # test: where Docker is required, its absence stops the run here instead.
    import docker  # noqa: F401


# Session fixtures every module may reach, the behaviour suite's e2b case among them.
from tests.docker_fixtures import docker_client, sandbox_image  # noqa: E402, F401
from tests.sandbox_fixtures import e2b_endpoint  # noqa: E402, F401


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_DOCKER and report.skipped and item.get_closest_marker("docker"):
        report.outcome = "failed"
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"Docker test skipped while GEM_SANDBOX_REQUIRE_DOCKER=1: {reason}"
