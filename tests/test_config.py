"""Configuration: one place picks the backend and the limits, in code or the environment;
every setting is checked where it is set, has one name, and is documented."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import gem_sandbox
from gem_sandbox.agent.limits import DEFAULTS as AGENT_LIMIT_DEFAULTS
from gem_sandbox.runtime import Runtime
from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.local import LocalBackend
from gem_sandbox.sandbox.errors import BackendNotAvailable, ConfigError
from gem_sandbox.sandbox.limits import RunLimits
from gem_sandbox.sandbox.pool import PoolConfig
from gem_sandbox.sandbox.settings import declared

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "configuration.md"
CLASSES = (PoolConfig, SandboxSpec, RunLimits)


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch):
    monkeypatch.setattr(defaults, "_backend_name", None)
    monkeypatch.setattr(defaults, "_pool_config", None)
    monkeypatch.setattr(defaults, "_warned", set())
    for variable in defaults.VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv(defaults.BACKEND_VARIABLE, raising=False)


def test_configure_sets_pool_spec_and_limit_options_in_one_call():
    cfg = gem_sandbox.configure(backend="local", max_size=3, memory_mb=512, run_memory_mb=256, max_output_bytes=1000)
    assert (cfg.max_size, cfg.spec.memory_mb) == (3, 512)
    assert (cfg.limits.run_memory_mb, cfg.limits.max_output_bytes) == (256, 1000)
    assert defaults.backend_name() == "local" and defaults.pool_config() is cfg


@pytest.mark.parametrize(
    ("cls", "values", "message"),
    [
        (PoolConfig, {"max_size": "abc"}, "max_size must be an int >= 1, got 'abc'"),
        (PoolConfig, {"max_size": True}, "max_size must be an int >= 1, got True"),
        (PoolConfig, {"run_timeout": 0}, "run_timeout must be a number > 0, got 0"),
        (PoolConfig, {"min_idle": 9}, r"min_idle must be an int from 0 to max_size \(8\), got 9"),
        (PoolConfig, {"spec": {}}, "spec must be a SandboxSpec, got {}"),
        (SandboxSpec, {"memory_mb": -1}, "memory_mb must be an int >= 64, got -1"),
        (SandboxSpec, {"image": 3}, "image must be a string or None, got 3"),
        (RunLimits, {"run_memory_mb": -1}, "run_memory_mb must be an int >= 0, got -1"),
        (RunLimits, {"cpu_seconds": 1.5}, r"cpu_seconds must be an int >= 1 or None, got 1.5"),
    ],
)
def test_a_bad_value_is_refused_when_the_config_is_made(cls: type, values: dict[str, Any], message: str):
    with pytest.raises(ConfigError, match=f"^{message}"):
        cls(**values)


def test_numbers_accept_ints_and_optional_settings_accept_none():
    cfg = gem_sandbox.configure(run_timeout=2, cpus=2, cpu_seconds=None, image=None, min_idle=None)
    assert (cfg.run_timeout, cfg.spec.cpus, cfg.idle_target) == (2, 2, 2)
    assert cfg.limits.cpu_seconds is None and cfg.spec.image is None


def test_a_zero_run_memory_means_no_per_run_cap_on_the_wire():
    assert RunLimits(run_memory_mb=0).to_wire()["memory_mb"] == 0


def test_run_limits_go_to_the_agent_under_its_own_keys_and_defaults():
    assert RunLimits().to_wire() == AGENT_LIMIT_DEFAULTS


def test_a_derived_min_idle_follows_a_new_max_size_and_a_given_one_stays():
    assert gem_sandbox.configure(max_size=1).idle_target == 1
    assert Runtime(max_size=4).config.idle_target == 2
    gem_sandbox.configure(max_size=4, min_idle=2)
    assert Runtime().config.idle_target == 2
    with pytest.raises(ConfigError, match="min_idle must be an int from 0 to max_size"):
        Runtime(max_size=1)  # a min_idle the user set does not shrink silently
    gem_sandbox.configure(min_idle=0)
    assert Runtime(max_size=4).config.idle_target == 0


def test_configure_checks_everything_before_changing_anything():
    before = gem_sandbox.configure(backend="process", max_size=3)
    with pytest.raises(ConfigError, match="memory_mb must be an int >= 64, got 1"):
        gem_sandbox.configure(backend="local", max_size=5, memory_mb=1)
    assert defaults.pool_config() is before and defaults.backend_name() == "process"


def test_a_runtime_checks_its_options_when_it_is_made():
    with pytest.raises(ConfigError, match="max_size must be an int >= 1, got 'abc'"):
        Runtime(max_size="abc")
    with pytest.raises(ConfigError, match="did you mean 'max_size'"):
        Runtime(max_sise=3)


def test_an_unknown_option_lists_the_valid_ones_and_the_closest():
    with pytest.raises(ConfigError) as caught:
        gem_sandbox.configure(max_sise=3)
    valid = ", ".join(sorted([*defaults.OPTIONS, "backend"]))
    assert str(caught.value) == f"unknown sandbox option 'max_sise'; did you mean 'max_size'? Valid options: {valid}"
    with pytest.raises(ConfigError, match="^unknown sandbox option 'xyzzy'. Valid options: acquire_timeout, "):
        gem_sandbox.configure(xyzzy=3)


def test_unknown_backends_are_refused_in_code_and_in_the_environment(monkeypatch):
    with pytest.raises(ConfigError, match="unknown backend 'podman'; choose one of: auto, docker, local, process"):
        gem_sandbox.configure(backend="podman")
    monkeypatch.setenv("GEM_SANDBOX_BACKEND", "podman")
    with pytest.raises(ConfigError, match="unknown backend 'podman' in GEM_SANDBOX_BACKEND"):
        defaults.pool_config()


def test_the_field_names_of_the_three_classes_are_disjoint():
    names = [f.name for cls in CLASSES for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


# -- the environment ----------------------------------------------------------------------
def test_environment_variables_configure_before_any_call(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_BACKEND", "process")
    monkeypatch.setenv("GEM_SANDBOX_MAX_SIZE", "5")
    monkeypatch.setenv("GEM_SANDBOX_CPUS", "1.5")
    monkeypatch.setenv("GEM_SANDBOX_RUN_TIMEOUT", "2.5")
    monkeypatch.setenv("GEM_SANDBOX_RUN_MEMORY_MB", "0")
    cfg = defaults.pool_config()
    assert defaults.backend_name() == "process"
    assert (cfg.max_size, cfg.spec.cpus, cfg.run_timeout, cfg.limits.run_memory_mb) == (5, 1.5, 2.5, 0)


def test_environment_values_are_parsed_by_the_setting_type(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_IMAGE", "my-image:1")
    monkeypatch.setenv("GEM_SANDBOX_CPU_SECONDS", "none")
    monkeypatch.setenv("GEM_SANDBOX_MIN_IDLE", "")
    cfg = defaults.pool_config()
    assert (cfg.spec.image, cfg.limits.cpu_seconds, cfg.min_idle) == ("my-image:1", None, None)


@pytest.mark.parametrize(
    ("variable", "raw", "message"),
    [
        ("GEM_SANDBOX_MAX_SIZE", "lots", "GEM_SANDBOX_MAX_SIZE must be an int >= 1, got 'lots'"),
        ("GEM_SANDBOX_MAX_SIZE", "1.5", "GEM_SANDBOX_MAX_SIZE must be an int >= 1, got '1.5'"),
        ("GEM_SANDBOX_MAX_SIZE", "none", "GEM_SANDBOX_MAX_SIZE must be an int >= 1, got 'none'"),
        ("GEM_SANDBOX_MEMORY_MB", "10", "GEM_SANDBOX_MEMORY_MB must be an int >= 64, got 10"),
        ("GEM_SANDBOX_RUN_TIMEOUT", "0", "GEM_SANDBOX_RUN_TIMEOUT must be a number > 0, got 0.0"),
    ],
)
def test_a_malformed_environment_value_names_its_variable(monkeypatch, variable: str, raw: str, message: str):
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        defaults.pool_config()


def test_a_misspelt_variable_is_warned_about_once_at_the_callers_line(monkeypatch):
    monkeypatch.setenv("GEM_SANDBOX_MAX_SISE", "3")
    with pytest.warns(UserWarning, match="ignoring GEM_SANDBOX_MAX_SISE.*did you mean GEM_SANDBOX_MAX_SIZE") as seen:
        Runtime()
    assert [w.filename for w in seen] == [__file__]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Runtime()
        gem_sandbox.configure(max_size=2)


def test_known_variables_that_are_not_settings_are_not_warned_about(monkeypatch):
    for variable in defaults.OTHER_VARIABLES:
        monkeypatch.setenv(variable, "1")
    monkeypatch.setenv("GEM_SANDBOX_BACKEND", "process")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        defaults.pool_config()


def test_every_gem_sandbox_variable_the_project_uses_is_known():
    """A variable the code reads but the registry lacks would be warned about as a typo."""
    from gem_sandbox.service import options as service_config

    known = {*defaults.VARIABLES, defaults.BACKEND_VARIABLE, *defaults.OTHER_VARIABLES, *service_config.VARIABLES}
    sources = [ROOT / "README.md", *(ROOT / ".ci").glob("*")]
    for top in ("gem_sandbox", "envs", "benchmarks", "tests"):
        sources += (ROOT / top).rglob("*.py")
    used = {
        name
        for path in sources
        if path.is_file() and path.name != Path(__file__).name
        for name in re.findall(r"(?<![\w])GEM_SANDBOX_[A-Z0-9_]*[A-Z0-9](?=[\"'=])", path.read_text())
    }
    assert used - known <= {"GEM_SANDBOX_MAX_SZE"}  # the misspelling tests make on purpose


# -- the reference ------------------------------------------------------------------------
def reference_row(cls: type, field: dataclasses.Field[Any]) -> str:
    """The table row docs/configuration.md must have for ``field``, from its declaration."""
    rule = declared(field)
    if field.default is dataclasses.MISSING:
        made = field.default_factory()  # type: ignore[misc]
        default = f"{type(made).__name__}()" if dataclasses.is_dataclass(made) else repr(made)
    else:
        default = repr(field.default)
    variable = f"`{defaults.ENV_PREFIX}{field.name.upper()}`" if field.name in defaults.VARIABLES.values() else "-"
    kind = rule.type_name + (" or None" if rule.optional else "")
    cells = [f"`{field.name}`", variable, kind, f"`{default}`", rule.bound or "-", f"`{cls.__name__}`", rule.doc]
    return "| " + " | ".join(cells) + " |"


def test_the_reference_table_documents_every_setting_with_its_current_default():
    lines = set(REFERENCE.read_text().splitlines())
    missing = [row for cls in CLASSES for f in dataclasses.fields(cls) if (row := reference_row(cls, f)) not in lines]
    assert not missing, "docs/configuration.md lacks (or has stale) rows:\n" + "\n".join(missing)


def test_the_reference_documents_the_backends_and_the_other_variables():
    text = REFERENCE.read_text()
    backend_row = next(line for line in text.splitlines() if line.startswith("| `backend` |"))
    assert all(f"`{name}`" in backend_row for name in defaults.BACKEND_CHOICES)
    assert all(f"`{variable}`" in text for variable in defaults.OTHER_VARIABLES)


# -- backends -----------------------------------------------------------------------------
def docker_backend() -> type:
    pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")
    return defaults.backend_class("docker")


def test_auto_prefers_docker_then_bubblewrap(monkeypatch):
    DockerBackend = docker_backend()
    monkeypatch.setattr(DockerBackend, "check", classmethod(lambda cls: None))
    assert defaults.resolve_backend_name("auto") == "docker"
    monkeypatch.setattr(DockerBackend, "check", classmethod(lambda cls: "no daemon"))
    assert defaults.resolve_backend_name("auto") == "local"


def test_auto_never_falls_back_to_the_unisolated_backend(monkeypatch):
    DockerBackend = docker_backend()
    monkeypatch.setattr(DockerBackend, "check", classmethod(lambda cls: "no daemon"))
    monkeypatch.setattr(LocalBackend, "check", classmethod(lambda cls: "bwrap is missing"))
    with pytest.raises(BackendNotAvailable, match="backend='process' knowingly"):
        defaults.resolve_backend_name("auto")


def test_a_named_backend_that_cannot_run_says_why(monkeypatch):
    monkeypatch.setattr(LocalBackend, "check", classmethod(lambda cls: "bwrap is missing"))
    with pytest.raises(BackendNotAvailable, match="local backend cannot run here: bwrap is missing"):
        defaults.make_backend("local")
