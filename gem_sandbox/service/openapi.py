"""The OpenAPI 3.1 document, made from the route table and the pydantic models that check
each request, so the document cannot disagree with what the service accepts: every field's
type, range and pattern is the model's, a body is required only where the model has a
required field, the languages are those the pool's sandboxes run, and each operation lists
exactly the statuses it can answer (docs/service.md, "Errors"); schemathesis checks it
against the running service (tests/test_service_schema.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from gem_sandbox import __version__

if TYPE_CHECKING:
    from gem_sandbox.service.route import Route

_REF = "#/components/schemas/{model}"
_MUTATING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
#: What each status means, as docs/service.md's table of errors says.
_REASONS = {
    400: "a malformed body, query or header, or a language the sandboxes do not run",
    401: "no token, or a wrong one",
    404: "no such sandbox for this token, or no such file",
    408: "the body did not arrive within read_timeout",
    409: "the sandbox's files do not allow it (a directory where a file is named, a file over the read limit)",
    413: "the body is over max_body_bytes",
    507: "the sandbox's disk is full",
    422: "an Idempotency-Key reused for a different request",
    429: "a quota of the token; Retry-After says when to come back",
    503: "no capacity in time, or the service is starting or shutting down; Retry-After says when to come back",
    504: "no capacity in time (SandboxFusion's routes, whose clients retry a 504); Retry-After says when to come back",
}


def document(routes: Sequence[Route], languages: Sequence[str] | None = None) -> dict[str, Any]:
    """The document of ``routes``; ``languages`` (those the sandboxes run, when known) become
    the enum of every ``language`` field."""
    models: list[type[BaseModel]] = []
    for route in routes:
        models += [m for m in (route.body, route.answer) if m is not None and m not in models]
    refs, schemas = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    components = dict(schemas.get("$defs", {}), **{route.shape.name: route.shape.schema for route in routes})
    if languages:
        _only(components, sorted(languages))
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, refs)
        links = _links(route, routes)
        if links:
            paths[route.path][route.method.lower()]["responses"][str(route.status)]["links"] = links
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


def _only(components: dict[str, Any], languages: list[str]) -> None:
    """Hold every request's ``language`` field to ``languages``."""
    for schema in components.values():
        field = schema.get("properties", {}).get("language")
        if field is not None and field.get("type") == "string":
            field["enum"] = languages


def _operation(route: Route, refs: dict[Any, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": route.summary, "operationId": route.operation_id}
    parameters = [
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    ] if "{id}" in route.path else []
    parameters += _query(route.query) if route.query is not None else []
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        required = any(field.is_required() for field in route.body.model_fields.values())
        schema = refs[(route.body, "validation")]
        operation["requestBody"] = {"required": required, "content": {"application/json": {"schema": schema}}}
        if not required:
            operation["requestBody"]["description"] = "optional: no body is the same as {}"
    answer: dict[str, Any] = {"description": route.summary}
    if route.answer is not None:
        answer["content"] = {route.media: {"schema": refs[(route.answer, "validation")]}}
    elif route.status != 204:
        answer["content"] = {route.media: {}}
    errors = {str(status): _error(status, route.shape.name) for status in sorted(_errors(route))}
    if route.public:  # a public route answers its own shape, whatever its status
        errors = {status: dict(answer, description=_REASONS[int(status)]) for status in errors}
    operation["responses"] = {str(route.status): answer} | errors
    operation["security"] = [] if route.public else [{"bearer": []}]
    return operation


def _links(route: Route, routes: Sequence[Route]) -> dict[str, Any]:
    """What a route that creates something (201 with an ``id``) leads to: every route under
    its path that takes that id."""
    if route.status != 201 or route.answer is None or "id" not in route.answer.model_fields:
        return {}
    below = f"{route.path}/{{id}}"
    return {
        other.operation_id: {"operationId": other.operation_id, "parameters": {"id": "$response.body#/id"}}
        for other in routes
        if other.path == below or other.path.startswith(below + "/")
    }


def _errors(route: Route) -> set[int]:
    """The error statuses ``route`` can answer: those of its own, and for a route that needs
    a token those of the guard every such request passes (token, quotas, body, capacity)."""
    if route.public:
        return set(route.errors)
    common = {400, 401, 408, 413, 429, 503} | ({422} if route.method in _MUTATING else set())
    return common | set(route.errors) | ({404} if "{id}" in route.path else set())


def _error(status: int, shape: str) -> dict[str, Any]:
    schema = {"$ref": _REF.format(model=shape)}
    return {"description": _REASONS.get(status, "see docs/service.md, Errors"), "content": {"application/json": {"schema": schema}}}


def _query(model: type[BaseModel]) -> list[dict[str, Any]]:
    """A query parameter per field of ``model`` (a list field is a repeated parameter)."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": field, "style": "form", "explode": True}
        for name, field in schema["properties"].items()
    ]
