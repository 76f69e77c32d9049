"""A real pool service on loopback for the service tests: ``service`` (Docker, two tokens
with quotas) and :func:`serving` for tests that need other settings.

Test modules import what they use (``from tests.service_fixtures import ...``) and mark their
Docker cases; the server runs in the test's own event loop, on port 0 of 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gem_sandbox.runtime import Runtime
from gem_sandbox.service import ServeOptions, TokenPolicy, running
from gem_sandbox.service.state import Service
from tests.docker_fixtures import docker_client, sandbox_image  # noqa: F401 - fixtures

ALPHA = TokenPolicy(name="alpha", secret="alpha-secret", max_leases=4)
BETA = TokenPolicy(name="beta", secret="beta-secret", max_leases=4)


def auth(policy: TokenPolicy) -> dict[str, str]:
    return {"Authorization": f"Bearer {policy.secret}"}


@asynccontextmanager
async def serving(
    backend: str,
    image: str | None = None,
    tokens: tuple[TokenPolicy, ...] = (ALPHA, BETA),
    pool_options: dict[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[Service]:
    """A service on 127.0.0.1, any free port, with a small pool of ``backend`` sandboxes
    (``pool_options`` on top of its size)."""
    pool: dict[str, Any] = {"max_size": 4, "min_idle": 2, **(pool_options or {})}
    if image is not None:
        pool["image"] = image
    options = ServeOptions(host="127.0.0.1", port=0, backend=backend, tokens=tokens, **settings)
    async with Runtime(backend, **pool) as runtime, running(options, runtime) as service:
        await runtime.wait_ready()
        yield service


@pytest.fixture
async def service(sandbox_image: str) -> AsyncIterator[Service]:  # noqa: F811 - the fixture above
    async with serving("docker", sandbox_image) as running_service:
        yield running_service
