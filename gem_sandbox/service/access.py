"""Who is asking, and may they: tokens (:class:`Access`) and each one's quotas (:class:`Tenant`).

A token comes as ``Authorization: Bearer <secret>`` or as the ``/t/<secret>/`` prefix of the
path, for clients that can set an endpoint but no header (the ``sandbox-fusion`` package,
verl). Secrets are looked up by their SHA-256, so the lookup's timing says nothing about a
secret, and the secret itself is kept nowhere but in the options. With no token configured
every request is the one ``anonymous`` tenant (the options allow that on loopback only).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gem_sandbox.service.errors import Problem
from gem_sandbox.service.options import TokenPolicy

ANONYMOUS = TokenPolicy(name="anonymous", secret="-", max_concurrency=1_000_000, max_leases=1_000_000)


class Tenant:
    """One token's live state: requests in flight, its rate bucket, the leases it holds."""

    def __init__(self, policy: TokenPolicy) -> None:
        self.policy = policy
        self.name = policy.name
        self.in_flight = 0
        self.leases = 0
        self._tokens = policy.bucket
        self._refilled = time.monotonic()

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """Hold one of the token's concurrent slots for a request, if its quotas allow;
        else raise a 429 :class:`Problem` saying which quota and when to come back."""
        self._take_rate()
        if self.in_flight >= self.policy.max_concurrency:
            raise Problem(
                429,
                "too_many_requests",
                f"token {self.name} has {self.in_flight} requests in flight, its limit; wait for some to finish",
                retry_after=1,
            )
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    def _take_rate(self) -> None:
        rate = self.policy.rate
        if rate is None:
            return
        now = time.monotonic()
        self._tokens = min(self.policy.bucket, self._tokens + (now - self._refilled) * rate)
        self._refilled = now
        if self._tokens < 1:
            raise Problem(
                429,
                "rate_limited",
                f"token {self.name} is limited to {rate:g} requests/s",
                retry_after=(1 - self._tokens) / rate,
            )
        self._tokens -= 1


class Access:
    """The tenants, by secret."""

    def __init__(self, policies: tuple[TokenPolicy, ...]) -> None:
        self.open = not policies
        self.tenants = [Tenant(p) for p in policies] or [Tenant(ANONYMOUS)]
        self._by_digest = {_digest(t.policy.secret): t for t in self.tenants}

    def authenticate(self, authorization: str | None, path_secret: str | None) -> Tenant:
        """The tenant a request speaks for; 401 when it names none."""
        if self.open:
            return self.tenants[0]
        secret = path_secret
        if secret is None and authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer":
                secret = value.strip()
        if not secret:
            raise Problem(
                401,
                "unauthorized",
                "no token: send 'Authorization: Bearer <token>' or use the endpoint http://host:port/t/<token>/",
            )
        tenant = self._by_digest.get(_digest(secret))
        if tenant is None:
            raise Problem(401, "unauthorized", "the token is not valid here; check it with the service's operator")
        return tenant


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()
