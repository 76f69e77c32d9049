"""How ``gem-sandbox serve`` is set up: its :class:`ServeOptions` and each token's :class:`TokenPolicy`.

Settings come from a TOML file, ``GEM_SANDBOX_SERVE_*`` variables and flags, later ones winning
(:func:`load`). Fields are declared with the sandbox settings' :func:`setting`, so a bad value
fails where it is set with the same message as a bad pool option. The pool's own options
(``max_size``, ``memory_mb``, ...) are the sandbox settings' (docs/configuration.md): the
file's ``[pool]`` table or ``--pool NAME=VALUE``, over the ``GEM_SANDBOX_*`` variables.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gem_sandbox.sandbox import defaults
from gem_sandbox.sandbox.errors import ConfigError
from gem_sandbox.sandbox.settings import check, declared, setting

ENV_PREFIX = defaults.SERVICE_PREFIX
MIB = 1024 * 1024
#: Stateless runs one sandbox serves at once by default on the service (the pool's own default
#: is 1). Trainers' scoring runs mostly wait (verl's SandboxFusion tests sleep 10-20 s in 32
#: threads): at one run per sandbox a pool of 8 makes the fourth wave wait past its clients'
#: 30 s timeout; at 4, 32 such runs fit at once. Each shared run has its own uid, group and dir.
SHARED_RUNS = 4


@dataclass(frozen=True)
class TokenPolicy:
    """One client's secret and quotas. ``name`` is what logs and metrics show."""

    name: str = setting(kind=str, doc="the token's name, shown in logs and metrics instead of its secret")
    secret: str = setting(kind=str, doc="what the client sends as its bearer token or /t/<secret>/ prefix")
    max_concurrency: int = setting(256, kind=int, at_least=1, doc="requests in flight at once; one more answers 429")
    rate: float | None = setting(None, kind=float, above=0, doc="requests per second, refilled continuously; None = no rate limit")
    burst: int | None = setting(None, kind=int, at_least=1, doc="requests the rate bucket holds; None = twice the rate, at least 1")
    max_leases: int = setting(64, kind=int, at_least=0, doc="sandboxes this token may hold at once (429 past it)")

    def __post_init__(self) -> None:
        check(self)
        if not self.secret.strip() or "/" in self.secret:
            raise ConfigError(f"token {self.name!r}: a secret must be non-empty and contain no '/'")

    @property
    def bucket(self) -> float:
        """Depth of the rate bucket."""
        if self.burst is not None:
            return float(self.burst)
        return max(1.0, 2 * (self.rate or 0.0))


@dataclass(frozen=True)
class ServeOptions:
    host: str = setting("127.0.0.1", kind=str, doc="address to bind; anything but loopback needs a token")
    port: int = setting(8080, kind=int, at_least=0, doc="port to bind; 0 = any free port")
    backend: str = setting("auto", kind=str, doc="the pool's backend: auto, docker, local or process")
    max_body_bytes: int = setting(8 * MIB, kind=int, at_least=1024, doc="largest request body; past it 413")
    max_run_timeout: float = setting(300.0, kind=float, above=0, doc="longest timeout a request may ask for; longer ones are clamped")
    lease_ttl: float = setting(300.0, kind=float, above=0, doc="seconds a lease lives after its last request, unless the lease asks otherwise")
    max_lease_ttl: float = setting(3600.0, kind=float, above=0, doc="longest ttl a lease may ask for")
    read_timeout: float = setting(30.0, kind=float, above=0, doc="seconds a client has to send its request body; past it 408")
    header_timeout: float = setting(
        30.0, kind=float, above=0, doc="seconds a connection may sit idle or take to send a request's headers; past it, closed"
    )
    queue_timeout: float = setting(
        10.0, kind=float, above=0, doc="seconds a request waits for the pool's capacity; past it 503 with Retry-After"
    )
    max_queue: int = setting(1000, kind=int, at_least=0, doc="requests waiting for the pool's capacity; one more answers 503 at once")
    shutdown_timeout: float = setting(30.0, kind=float, above=0, doc="seconds requests in flight get to finish at shutdown")
    idempotency_ttl: float = setting(600.0, kind=float, above=0, doc="seconds an answer is kept for retries with its Idempotency-Key")
    idempotency_bytes: int = setting(64 * MIB, kind=int, at_least=0, doc="bytes of answers kept for retries; the oldest go first")
    e2b_compatible: bool = setting(False, kind=bool, doc="also serve the e2b SDK's API (docs/service.md, e2b-compatible endpoint)")
    pool: dict[str, Any] = setting(kind=dict, factory=dict, doc="the pool's options (docs/configuration.md), over GEM_SANDBOX_* variables")
    tokens: tuple[TokenPolicy, ...] = setting(kind=tuple, factory=tuple, doc="the clients; none = open to all, on loopback only")

    def __post_init__(self) -> None:
        check(self)
        if self.backend not in defaults.BACKEND_CHOICES:
            raise ConfigError(f"backend must be one of {', '.join(defaults.BACKEND_CHOICES)}, got {self.backend!r}")
        defaults.with_options(defaults.pool_config(), self.pool)  # checks the names and values
        names = [t.name for t in self.tokens]
        secrets = [t.secret for t in self.tokens]
        if len(set(names)) < len(names) or len(set(secrets)) < len(secrets):
            raise ConfigError("token names and secrets must each be unique")
        if not self.tokens and not is_loopback(self.host):
            raise ConfigError(
                f"refusing to serve {self.host} without tokens: anyone who reaches it could run code. "
                "Add a token (--token NAME=SECRET) or bind 127.0.0.1"
            )

    def pool_options(self) -> dict[str, Any]:
        """The pool's options, with the service's default :data:`SHARED_RUNS` runs per sandbox
        unless the ``[pool]`` table or ``GEM_SANDBOX_RUNS_PER_SANDBOX`` sets it."""
        if "runs_per_sandbox" in self.pool or "runs_per_sandbox" in defaults.environment_options():
            return dict(self.pool)
        return {"runs_per_sandbox": SHARED_RUNS, **self.pool}


#: The settings a flag, a variable or a top-level TOML key sets.
_SCALARS = {f.name: f for f in dataclasses.fields(ServeOptions) if f.name not in ("pool", "tokens")}
TOKENS_VARIABLE = ENV_PREFIX + "TOKENS"
#: Every ``GEM_SANDBOX_SERVE_*`` variable :func:`load` reads.
VARIABLES = frozenset({ENV_PREFIX + name.upper() for name in _SCALARS} | {TOKENS_VARIABLE})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load(
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    pool_overrides: Mapping[str, str] = {},
    token_overrides: Sequence[str] = (),
) -> ServeOptions:
    """The options from a TOML file, then ``GEM_SANDBOX_SERVE_*`` variables, then flags
    (``overrides``; ``pool_overrides`` as ``NAME=VALUE`` text; ``token_overrides`` as
    ``NAME=SECRET``). ``GEM_SANDBOX_SERVE_TOKENS`` holds ``NAME=SECRET`` pairs, comma-separated."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    pool: dict[str, Any] = {}
    tokens: dict[str, TokenPolicy] = {}
    if path is not None:
        with open(path, "rb") as f:
            try:
                document = tomllib.load(f)
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        pool.update(document.pop("pool", {}))
        for name, table in document.pop("tokens", {}).items():
            if not isinstance(table, dict):
                raise ConfigError(f"{path}: [tokens.{name}] must be a table with at least a secret")
            tokens[name] = _policy(name, table, f"{path}: [tokens.{name}]")
        values.update(document)
    for variable, raw in environ.items():
        if not variable.startswith(ENV_PREFIX):
            continue
        name = variable.removeprefix(ENV_PREFIX).lower()
        if variable == TOKENS_VARIABLE:
            tokens.update(_token_pairs(raw.split(","), variable))
        else:
            values[name] = _parse(name, raw, variable)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    pool.update({name: defaults.parse_option(name, raw) for name, raw in pool_overrides.items()})
    tokens.update(_token_pairs(token_overrides, "--token"))
    unknown = set(values) - set(_SCALARS)
    if unknown:
        raise ConfigError(f"unknown service setting(s) {', '.join(sorted(unknown))}; valid: {', '.join(_SCALARS)}")
    return ServeOptions(**values, pool=pool, tokens=tuple(tokens.values()))


def _policy(name: str, table: Mapping[str, Any], where: str) -> TokenPolicy:
    known = {f.name for f in dataclasses.fields(TokenPolicy)} - {"name"}
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; valid: {', '.join(sorted(known))}")
    if "secret" not in table:
        raise ConfigError(f"{where} needs a secret")
    return TokenPolicy(name=name, **table)


def _token_pairs(pairs: Sequence[str], where: str) -> dict[str, TokenPolicy]:
    tokens = {}
    for pair in pairs:
        name, sep, secret = pair.strip().partition("=")
        if not sep or not name:
            raise ConfigError(f"{where}: a token is NAME=SECRET, got {pair!r}")
        tokens[name] = TokenPolicy(name=name, secret=secret)
    return tokens


def _parse(name: str, raw: str, variable: str) -> Any:
    if name not in _SCALARS:
        raise ConfigError(f"{variable} names no service setting; valid: {', '.join(_SCALARS)}")
    rule = declared(_SCALARS[name])
    try:
        return rule.parse(raw)
    except ValueError:
        raise ConfigError(f"{variable} must be {rule.describe()}, got {raw!r}") from None
