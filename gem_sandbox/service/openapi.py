"""The OpenAPI 3.1 document, made from the route table and the pydantic models that check
each request, so the document cannot disagree with what the service accepts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from gem_sandbox import __version__

if TYPE_CHECKING:
    from gem_sandbox.service.route import Route

_REF = "#/components/schemas/{model}"
_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            "required": ["type", "message"],
        }
    },
    "required": ["error"],
}


def document(routes: Sequence[Route]) -> dict[str, Any]:
    models: list[type[BaseModel]] = []
    for route in routes:
        models += [m for m in (route.body, route.answer) if m is not None and m not in models]
    refs, schemas = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    components = dict(schemas.get("$defs", {}), Error=_ERROR)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "gem-sandbox pool service",
            "version": __version__,
            "description": "Sandboxed code execution for agentic RL; see docs/service.md.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(route: Route, refs: dict[Any, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": route.summary, "operationId": route.operation_id}
    parameters = [
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    ] if "{id}" in route.path else []
    parameters += [
        {"name": name, "in": "query", "required": True, "schema": {"type": "array", "items": {"type": "string"}}}
        for name in route.query
    ]
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        schema = refs[(route.body, "validation")]
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    answer: dict[str, Any] = {"description": route.summary}
    if route.answer is not None:
        answer["content"] = {"application/json": {"schema": refs[(route.answer, "validation")]}}
    error = {"description": "see docs/service.md, Errors", "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}}}
    operation["responses"] = {str(route.status): answer, "default": error}
    operation["security"] = [] if route.public else [{"bearer": []}]
    return operation
