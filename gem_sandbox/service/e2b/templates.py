"""Which pool an e2b template name gets: :class:`Templates`.

e2b's own names (``base``, ``code-interpreter-v1``...) get the service's pool and its image.
Any other name is a template the operator built (``gem-sandbox images build --template NAME
--dockerfile PATH``; :mod:`gem_sandbox.sandbox.backends.docker.templates`), served on Docker
by a pool of its own, opened at its first sandbox with no warm ones (the service's sizes
otherwise) and closed with the service. A name that is neither is e2b's 404, never silently
the default image.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

import anyio

from gem_sandbox.runtime import Runtime
from gem_sandbox.service.errors import Problem
from gem_sandbox.service.options import ServeOptions

DEFAULT_TEMPLATES = frozenset({"base", "code-interpreter-v1", "code-interpreter", "desktop", "mcp-gateway"})


class Templates:
    """``async with templates:`` around the service's life: the pools of the templates used
    meanwhile are opened in its task group, and closed when it exits (after the leases)."""

    def __init__(self, options: ServeOptions, runtime: Runtime) -> None:
        self.options, self.runtime = options, runtime
        self._opened: dict[str, Runtime] = {}  # by image id
        self._lock = anyio.Lock()
        self._closing = anyio.Event()
        self._tg = anyio.create_task_group()

    async def __aenter__(self) -> Templates:
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        self._closing.set()
        return await self._tg.__aexit__(*exc)

    async def runtime_for(self, name: str) -> tuple[Runtime, bool]:
        """The runtime whose sandboxes are template ``name``'s, and whether it is a built
        template (whose home dir each new sandbox copies in)."""
        if name in DEFAULT_TEMPLATES:
            return self.runtime, False
        if self.runtime.backend != "docker":
            raise _unknown(name, f"templates are images, served with the Docker backend (this service runs {self.runtime.backend})")
        image = await anyio.to_thread.run_sync(_find, name)
        if image is None:
            raise _unknown(name, f"build it with `gem-sandbox images build --template {name} --dockerfile PATH`")
        async with self._lock:
            if image not in self._opened:
                opened = anyio.Event()
                self._tg.start_soon(self._hold, image, opened)
                await opened.wait()
        return self._opened[image], True

    async def _hold(self, image: str, opened: anyio.Event) -> None:
        """Keep a template's runtime open until the service closes."""
        options = {**self.options.pool_options(), "image": image, "min_idle": 0}
        async with Runtime("docker", **options) as runtime:
            self._opened[image] = runtime
            opened.set()
            await self._closing.wait()


def _find(name: str) -> str | None:
    import docker

    from gem_sandbox.sandbox.backends.docker.templates import find_template

    with closing(docker.from_env()) as client:
        return find_template(client, name)


def _unknown(name: str, how: str) -> Problem:
    return Problem(404, "not_found", f"template '{name}' not found: {how}")
