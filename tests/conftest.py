"""Suite-wide settings.

With ``GEM_SANDBOX_REQUIRE_DOCKER=1`` (set by ``.ci/run``) a Docker test that is skipped
counts as a failure: CI must never pass while the Docker backend went untested. With
``GEM_SANDBOX_REQUIRE_TRAINERS=1`` (``.ci/run``'s run of the trainer adapters' tests in the
venv that has every framework) any skip counts as a failure, a test module skipped for a
missing framework included: an adapter must never pass untested.
"""

from __future__ import annotations

import os
import signal

import pytest

REQUIRE_DOCKER = os.environ.get("GEM_SANDBOX_REQUIRE_DOCKER") == "1"
REQUIRE_TRAINERS = os.environ.get("GEM_SANDBOX_REQUIRE_TRAINERS") == "1"
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background (`cmd &` in a script), the suite inherits SIGINT ignored, and
    # so would every process it starts: the Ctrl-C tests (tests/test_exits.py, the reaping
    # ones) would then send a signal their processes never see. Handled here, it is back to
    # the default in each process the suite starts.
    signal.signal(signal.SIGINT, signal.default_int_handler)
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
    if report.skipped and (REQUIRE_TRAINERS or (REQUIRE_DOCKER and item.get_closest_marker("docker"))):
        _fail_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_TRAINERS and report.skipped:
        _fail_skip(report)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    report.outcome = "failed"
    reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
    variable = "GEM_SANDBOX_REQUIRE_TRAINERS" if REQUIRE_TRAINERS else "GEM_SANDBOX_REQUIRE_DOCKER"
    report.longrepr = f"skipped while {variable}=1: {reason}"
