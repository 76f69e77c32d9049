"""Configuration: one place picks the backend and the limits, in code or the environment."""

from __future__ import annotations

import pytest

import gem_sandbox
from gem_sandbox.sandbox import config
from gem_sandbox.sandbox.backends.local import LocalBackend
from gem_sandbox.sandbox.errors import BackendNotAvailable


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch):
    monkeypatch.setattr(config, "_backend_name", None)
    monkeypatch.setattr(config, "_pool_config", None)


def test_configure_sets_pool_spec_and_limit_options_in_one_call():
    cfg = gem_sandbox.configure(backend="local", max_size=3, memory_mb=512, max_output_bytes=1000)
    assert (cfg.max_size, cfg.spec.memory_mb, cfg.limits.max_output_bytes) == (3, 512, 1000)
    assert config.backend_name() == "local" and config.pool_config() is cfg


def test_environment_variables_configure_before_any_call(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_BACKEND", "process")
    monkeypatch.setenv("GEM_SANDBOX_MAX_SIZE", "5")
    monkeypatch.setenv("GEM_SANDBOX_CPUS", "1.5")
    monkeypatch.setenv("GEM_SANDBOX_RUN_TIMEOUT", "2.5")
    cfg = config.pool_config()
    assert config.backend_name() == "process"
    assert (cfg.max_size, cfg.spec.cpus, cfg.run_timeout) == (5, 1.5, 2.5)


def test_a_malformed_environment_value_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_MAX_SIZE", "lots")
    with pytest.raises(ValueError, match="GEM_SANDBOX_MAX_SIZE='lots'"):
        config.pool_config()


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown backend 'podman'"):
        gem_sandbox.configure(backend="podman")
    with pytest.raises(TypeError, match="unknown sandbox option 'max_sise'"):
        gem_sandbox.configure(max_sise=3)


def docker_backend() -> type:
    pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")
    return config.backend_class("docker")


def test_auto_prefers_docker_then_bubblewrap(monkeypatch):
    DockerBackend = docker_backend()
    monkeypatch.setattr(DockerBackend, "check", classmethod(lambda cls: None))
    assert config.resolve_backend_name("auto") == "docker"
    monkeypatch.setattr(DockerBackend, "check", classmethod(lambda cls: "no daemon"))
    assert config.resolve_backend_name("auto") == "local"


def test_auto_never_falls_back_to_the_unisolated_backend(monkeypatch):
    DockerBackend = docker_backend()
    monkeypatch.setattr(DockerBackend, "check", classmethod(lambda cls: "no daemon"))
    monkeypatch.setattr(LocalBackend, "check", classmethod(lambda cls: "bwrap is missing"))
    with pytest.raises(BackendNotAvailable, match="backend='process' knowingly"):
        config.resolve_backend_name("auto")


def test_a_named_backend_that_cannot_run_says_why(monkeypatch):
    monkeypatch.setattr(LocalBackend, "check", classmethod(lambda cls: "bwrap is missing"))
    with pytest.raises(BackendNotAvailable, match="local backend cannot run here: bwrap is missing"):
        config.make_backend("local")
