"""``gem-sandbox doctor`` reports every check, and on this machine Docker is ready."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

from gem_sandbox.cli import doctor
from gem_sandbox.sandbox.backends.docker import images
from gem_sandbox.sandbox import defaults
from tests.docker_fixtures import docker_client, sandbox_image  # noqa: F401

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def default_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case sees the environment it sets, not another test's ``configure()``."""
    monkeypatch.setattr(defaults, "_backend_name", None)
    monkeypatch.setattr(defaults, "_pool_config", None)
    monkeypatch.delenv("GEM_SANDBOX_BACKEND", raising=False)


def by_name() -> dict[str, doctor.Check]:
    return {c.name: c for c in doctor.checks()}


def test_doctor_reports_every_check_with_a_fix_for_each_failure() -> None:
    results = doctor.checks()
    assert [c.name for c in results] == [
        "python", "docker", "image", "polyglot", "bubblewrap", "languages", "service", "ray", "settings", "variables", "backend"
    ]
    assert all(c.detail for c in results)
    assert all(c.fix for c in results if not c.ok)


def test_doctor_sees_the_daemon_and_the_built_image_and_auto_takes_docker(sandbox_image: str) -> None:
    checks = by_name()
    assert checks["docker"].ok, checks["docker"].detail
    assert checks["image"].ok and sandbox_image in checks["image"].detail
    assert checks["backend"].ok and checks["backend"].detail.startswith("auto -> docker (")
    assert doctor.ready(list(checks.values()))


def test_doctor_reports_a_missing_daemon_instead_of_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    checks = by_name()
    assert not checks["docker"].ok and checks["docker"].fix
    assert not checks["image"].ok and checks["image"].fix == "fix the docker check first"
    if checks["bubblewrap"].ok:  # auto falls back to it, and says why
        assert checks["backend"].detail.startswith("auto -> local (docker: no Docker daemon answers")


def test_a_named_backend_that_cannot_run_fails_the_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("GEM_SANDBOX_BACKEND", "docker")
    results = doctor.checks()
    backend = results[-1]
    assert backend.name == "backend" and not backend.ok
    assert backend.detail.startswith("docker -> ") and "no Docker daemon answers" in backend.detail
    assert not doctor.ready(results)


def test_the_image_check_blames_what_failed_not_the_daemon(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(profile: str = "default") -> None:
        raise FileNotFoundError("no Dockerfile in /gone; reinstall gem-sandbox")

    monkeypatch.setattr(images, "context_dir", missing)
    checks = by_name()
    assert checks["docker"].ok
    assert checks["image"].detail == "no Dockerfile in /gone; reinstall gem-sandbox"
    assert checks["image"].fix == "reinstall gem-sandbox"


def test_a_bad_setting_fails_the_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_SANDBOX_MAX_SIZE", "abc")
    results = doctor.checks()
    settings = next(c for c in results if c.name == "settings")
    assert not settings.ok and "GEM_SANDBOX_MAX_SIZE" in settings.detail
    assert not doctor.ready(results)


def test_a_misspelt_variable_is_flagged_with_its_likely_name_but_does_not_fail_the_doctor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GEM_SANDBOX_MAX_SZE", "3")
    results = doctor.checks()
    variables = next(c for c in results if c.name == "variables")
    assert not variables.ok and "did you mean GEM_SANDBOX_MAX_SIZE?" in variables.detail
    assert doctor.ready(results) == next(c for c in results if c.name == "backend").ok
