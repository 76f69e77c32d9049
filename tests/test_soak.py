"""Short soaks: of a pool (``benchmarks/soak.py``) and of the service over HTTP
(``benchmarks/service_soak.py``): benign results exact, none lost, nothing leaked."""

from __future__ import annotations

import pytest

from benchmarks.service_soak import service_soak
from benchmarks.soak import HOSTILE, SoakReport, soak
from gem_sandbox.sandbox.result import Status
from tests.sandbox_fixtures import make_backend

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
async def test_a_short_soak_loses_nothing_misattributes_nothing_and_leaks_nothing(backend: str) -> None:
    make_backend(backend)  # skips, saying why, where the backend cannot run
    report: SoakReport = await soak(backend, 400, baseline_runs=100)
    benign = report.statuses["benign"]
    assert report.lost == 0 and report.misattributed == 0, report.failures
    assert report.wrong_status == 0, report.failures
    assert set(benign) <= {Status.OK.value, Status.ERROR.value}, benign
    assert report.dirty == 0, report.failures  # no tenant saw another's leftovers
    assert report.leaked_processes == 0 and report.leaked_containers == 0
    assert sum(sum(c.values()) for c in report.statuses.values()) == 400


async def test_a_minute_of_the_service_under_16_clients_loses_nothing_and_holds_nothing_after() -> None:
    make_backend("local")
    report = await service_soak("local", 60.0, clients=16)
    assert report.lost == 0 and report.misattributed == 0 and report.wrong_status == 0, report.failures
    assert report.dirty == 0 and report.masked == 0, report.failures
    assert report.abandoned > 0  # clients did leave mid-run...
    assert report.seats_held_after == 0 and report.leased_after == 0  # ...and took nothing with them
    assert report.leaked_processes == 0 and report.leaked_containers == 0
    assert sum(report.calls["benign"].values()) > 0 and set(report.calls) - {"benign", "abandoning"} == set(HOSTILE)
