"""One row of the service's route table: :class:`Route`. Each API's module declares its own
rows; the app mounts them all and :mod:`.openapi` documents them from the same rows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import BaseModel

from gem_sandbox.service.errors import ERROR, Shape

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    summary: str
    body: type[BaseModel] | None = None
    answer: type[BaseModel] | None = None
    status: int = 200
    public: bool = False  # needs no token
    query: type[BaseModel] | None = None  # its query parameters, each a field (a list: repeated)
    operation: str = ""  # its OpenAPI operationId, when not the handler's name
    media: str = "application/json"  # the content type of its answer
    errors: tuple[int, ...] = ()  # error statuses of its own, past those every private route has
    shape: Shape = ERROR  # how its errors look: its API's

    @property
    def operation_id(self) -> str:
        return self.operation or self.handler.__name__


#: The app's route table, for the routes that describe the service (the OpenAPI document).
TABLE = web.AppKey("routes", tuple[Route, ...])
