"""The constrained strings request bodies share: file paths, base64 contents, env variables.

Each is a pydantic type whose pattern is the rule the sandbox layer applies later (a path the
agent refuses, base64 the codec cannot decode, an env name the agent drops), so a request that
breaks it is refused up front with 400 naming its field, and the OpenAPI document, made from
the same types, states the rule exactly. A path is checked by the sandbox layer's own rule
(``transfer.check_path``), which :data:`PATH` states for the document; the other patterns are
checked as they are. They avoid look-around, so pydantic's regex engine, Python's and JSON
Schema's (ECMA 262) read them alike.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from gem_sandbox.sandbox import transfer
from gem_sandbox.sandbox.errors import UnsafePath

def _integral(value: Any) -> Any:
    """JSON Schema's integer is any number with no fraction (``3.0`` included)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An int field's validator for an integer as JSON Schema has it, in models that coerce nothing
#: else (strict ones); it goes after the field's constraints: ``Annotated[int, Field(ge=0), INTEGRAL]``.
INTEGRAL = BeforeValidator(_integral)

_SEGMENT = r"(?:[^/.\x00][^/\x00]*|\.[^/.\x00][^/\x00]*|\.\.[^/\x00]+|\.?)"
_FIRST = r"(?:[^/.\x00][^/\x00]*|\.[^/.\x00][^/\x00]*|\.\.[^/\x00]+|\.)"

#: A path relative to the work dir: not empty, not absolute, no ``..`` part, no NUL
#: (``transfer.check_path``'s rule).
PATH = rf"^{_FIRST}(?:/{_SEGMENT})*$"
#: Standard base64 with its padding, as ``base64.b64decode(validate=True)`` takes it.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
#: An environment variable's name: not empty, no ``=`` and no NUL; its value: no NUL.
ENV_NAME = r"^[^=\x00]+$"
ENV_VALUE = r"^[^\x00]*$"

_PATH_SCHEMA = {"type": "string", "pattern": PATH, "description": "a path relative to the work dir"}
_BASE64_SCHEMA = {"type": "string", "pattern": BASE64, "contentEncoding": "base64"}



def _checked(path: str) -> str:
    """``path`` if the agent would take it; else "unsafe path: <why>", the message the remote
    runtime reads as :class:`UnsafePath`."""
    try:
        transfer.check_path(path)
    except UnsafePath as exc:
        raise PydanticCustomError("unsafe_path", "unsafe path: {reason}", {"reason": str(exc)}) from None
    return path


RelativePath = Annotated[str, AfterValidator(_checked), WithJsonSchema(_PATH_SCHEMA)]


def _matching(pattern: str, message: str) -> AfterValidator:
    """Refuse a string ``pattern`` does not match in full, saying ``message``."""
    compiled = re.compile(pattern.removeprefix("^").removesuffix("$"))

    def check(text: str) -> str:
        if compiled.fullmatch(text) is None:
            raise PydanticCustomError("pattern", message)
        return text

    return AfterValidator(check)


Base64 = Annotated[str, _matching(BASE64, "not valid base64 (standard, padded)"), WithJsonSchema(_BASE64_SCHEMA)]
EnvName = Annotated[str, _matching(ENV_NAME, "an env name is not empty and holds no '=' or NUL")]
EnvValue = Annotated[str, _matching(ENV_VALUE, "an env value holds no NUL")]


def _mapping(keys: dict[str, Any], values: dict[str, Any]) -> WithJsonSchema:
    """An object whose every key matches ``keys`` and every value ``values`` (pydantic's own
    schema for a dict of constrained keys lets other keys through)."""
    return WithJsonSchema({"type": "object", "propertyNames": keys, "additionalProperties": values})


#: path -> base64 content.
Files = Annotated[dict[RelativePath, Base64], _mapping(_PATH_SCHEMA, _BASE64_SCHEMA)]
#: name -> value.
Env = Annotated[
    dict[EnvName, EnvValue],
    _mapping({"type": "string", "pattern": ENV_NAME}, {"type": "string", "pattern": ENV_VALUE}),
]


# -- SandboxFusion's paths: relative to the work dir, or absolute inside it ---------------------

WORK_DIR = "/work"  # the work dir of every backend's sandboxes, where SandboxFusion's code runs
_INSIDE = {"type": "string", "pattern": f"^{WORK_DIR}/{PATH[1:]}"}
_OUTSIDE = {"type": "string", "pattern": "^/", "not": {"pattern": f"^{WORK_DIR}/"}}
_PLACED_SCHEMA = {"anyOf": [_PATH_SCHEMA, _INSIDE]}


def _placed(path: str, *, outside: bool = False) -> str:
    """``path`` if it is relative to the work dir or absolute inside it (``codec.work_path``'s
    rule); an absolute one elsewhere only if ``outside`` (a file to fetch, left out)."""
    root = WORK_DIR + "/"
    if path.startswith("/") and not path.startswith(root):
        if outside:
            return path
        message = "unsafe path: {path} is outside the work dir " + WORK_DIR
        raise PydanticCustomError("unsafe_path", message, {"path": repr(path)})
    _checked(path.removeprefix(root))
    return path


PlacedPath = Annotated[str, AfterValidator(_placed), WithJsonSchema(_PLACED_SCHEMA)]
#: path -> base64 content, each path relative to the work dir or absolute inside it.
PlacedFiles = Annotated[dict[PlacedPath, Base64], _mapping(_PLACED_SCHEMA, _BASE64_SCHEMA)]
#: As :data:`PlacedFiles`, where a null content is skipped.
PlacedFilesOrNull = Annotated[
    dict[PlacedPath, Base64 | None], _mapping(_PLACED_SCHEMA, {"anyOf": [_BASE64_SCHEMA, {"type": "null"}]})
]
#: A file to read back: as :data:`PlacedPath`, or absolute outside the work dir (left out).
FetchPath = Annotated[
    str, AfterValidator(lambda path: _placed(path, outside=True)), WithJsonSchema({"anyOf": [_PATH_SCHEMA, _INSIDE, _OUTSIDE]})
]
