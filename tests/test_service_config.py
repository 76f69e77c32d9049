"""How ``gem-sandbox serve`` is configured: a TOML file, ``GEM_SANDBOX_SERVE_*`` variables and
flags, later ones winning; bad settings fail at load with a message naming them."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.errors import ConfigError
from gem_sandbox.sandbox.settings import declared
from gem_sandbox.service.options import ENV_PREFIX, ServeOptions, TokenPolicy, load

TOML = """
port = 9000
lease_ttl = 60.0

[pool]
max_size = 3

[tokens.trainer]
secret = "from-file"
rate = 5.0
max_leases = 2
"""


@pytest.fixture
def toml_file(tmp_path: Path) -> str:
    path = tmp_path / "service.toml"
    path.write_text(TOML)
    return str(path)


def test_a_file_sets_settings_pool_options_and_tokens(toml_file: str) -> None:
    config = load(toml_file, environ={})
    assert (config.port, config.lease_ttl, config.pool) == (9000, 60.0, {"max_size": 3})
    assert config.tokens == (TokenPolicy(name="trainer", secret="from-file", rate=5.0, max_leases=2),)


def test_variables_win_over_the_file_and_flags_over_both(toml_file: str) -> None:
    environ = {"GEM_SANDBOX_SERVE_PORT": "9100", "GEM_SANDBOX_SERVE_LEASE_TTL": "30", "GEM_SANDBOX_SERVE_TOKENS": "ci=env-secret"}
    config = load(toml_file, environ=environ, overrides={"port": 9200}, pool_overrides={"max_size": "5"})
    assert (config.port, config.lease_ttl, config.pool["max_size"]) == (9200, 30.0, 5)
    assert {t.name for t in config.tokens} == {"trainer", "ci"}


def test_no_token_is_allowed_on_loopback_only() -> None:
    assert ServeOptions(host="127.0.0.1").tokens == ()
    with pytest.raises(ConfigError, match="without tokens"):
        ServeOptions(host="0.0.0.0")
    assert ServeOptions(host="0.0.0.0", tokens=(TokenPolicy(name="a", secret="s"),)).host == "0.0.0.0"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"overrides": {"prot": 1}}, "unknown service setting"),
        ({"environ": {"GEM_SANDBOX_SERVE_PORT": "eighty"}}, "GEM_SANDBOX_SERVE_PORT must be an int"),
        ({"pool_overrides": {"max_sise": "3"}}, "did you mean 'max_size'"),
        ({"token_overrides": ["no-equals-sign"]}, "NAME=SECRET"),
        ({"overrides": {"max_run_timeout": -1.0}}, "max_run_timeout must be"),
        ({"overrides": {"backend": "kubernetes"}}, "backend must be one of"),
    ],
)
def test_bad_settings_fail_at_load_naming_the_setting(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(environ=kwargs.pop("environ", {}), **kwargs)


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("Yes", True), (" true ", True), ("0", False), ("no", False), ("FALSE", False)])
def test_a_bool_variable_takes_the_usual_words(raw: str, value: bool) -> None:
    assert load(environ={"GEM_SANDBOX_SERVE_E2B_COMPATIBLE": raw}).e2b_compatible is value


def test_a_bool_setting_takes_only_true_or_false() -> None:
    with pytest.raises(ConfigError, match="GEM_SANDBOX_SERVE_E2B_COMPATIBLE must be a bool, got 'maybe'"):
        load(environ={"GEM_SANDBOX_SERVE_E2B_COMPATIBLE": "maybe"})
    with pytest.raises(ConfigError, match="e2b_compatible must be a bool, got 1"):
        ServeOptions(e2b_compatible=1)  # type: ignore[arg-type]
    assert load(environ={}, overrides={"e2b_compatible": True}).e2b_compatible is True


def test_a_token_table_without_a_secret_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[tokens.x]\nrate = 1.0\n")
    with pytest.raises(ConfigError, match="needs a secret"):
        load(str(path), environ={})


def test_duplicate_secrets_are_refused() -> None:
    with pytest.raises(ConfigError, match="unique"):
        load(environ={}, token_overrides=["a=same", "b=same"])


def test_service_variables_are_not_warned_about_as_unknown_sandbox_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_SANDBOX_SERVE_PORT", "9000")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        defaults.environment_options()
    assert "GEM_SANDBOX_SERVE_PORT" not in defaults.unknown_variables()


REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "service.md"


def reference_row(cls: type, field: dataclasses.Field) -> str:
    """The row docs/service.md must have for ``field``, from its declaration."""
    rule = declared(field)
    default = repr(field.default_factory()) if field.default is dataclasses.MISSING else repr(field.default)  # type: ignore[misc]
    kind = rule.type_name + (" or None" if rule.optional else "")
    cells = [f"`{field.name}`", kind, f"`{default}`", rule.bound or "-", rule.doc]
    if cls is ServeOptions:
        cells.insert(1, f"`{ENV_PREFIX}{field.name.upper()}`")
    return "| " + " | ".join(cells) + " |"


def test_the_reference_documents_every_setting_with_its_current_default() -> None:
    lines = set(REFERENCE.read_text().splitlines())
    rows = [reference_row(ServeOptions, f) for f in dataclasses.fields(ServeOptions) if f.name not in ("pool", "tokens")]
    rows += [reference_row(TokenPolicy, f) for f in dataclasses.fields(TokenPolicy) if f.name not in ("name", "secret")]
    missing = [row for row in rows if row not in lines]
    assert not missing, "docs/service.md lacks (or has stale) rows:\n" + "\n".join(missing)
