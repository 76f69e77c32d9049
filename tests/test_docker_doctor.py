"""``gem-sandbox doctor`` reports every check, and on this machine Docker is ready."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

from gem_sandbox import doctor
from tests.docker_fixtures import docker_client, sandbox_image  # noqa: F401

pytestmark = pytest.mark.docker


def test_doctor_reports_every_check_with_a_fix_for_each_failure() -> None:
    results = doctor.checks()
    assert [c.name for c in results] == ["python", "docker", "image", "bubblewrap"]
    assert all(c.detail for c in results)
    assert all(c.fix for c in results if not c.ok)


def test_doctor_sees_the_daemon_and_the_built_image(sandbox_image: str) -> None:
    by_name = {c.name: c for c in doctor.checks()}
    assert by_name["docker"].ok, by_name["docker"].detail
    assert by_name["image"].ok and sandbox_image in by_name["image"].detail


def test_doctor_reports_a_missing_daemon_instead_of_raising(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    by_name = {c.name: c for c in doctor.checks()}
    assert not by_name["docker"].ok and by_name["docker"].fix
    assert not by_name["image"].ok
