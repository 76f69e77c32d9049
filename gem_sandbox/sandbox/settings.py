"""Declared settings: each field of :class:`PoolConfig`, :class:`SandboxSpec` and
:class:`RunLimits` states its type, range and one-line description in its metadata.

One declaration serves the check at construction, the parsing of ``GEM_SANDBOX_*`` variables
and the reference table in ``docs/configuration.md`` (which a test compares against it), so
none of them can disagree with another.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass
from typing import Any

from gem_sandbox.sandbox.errors import ConfigError

_KEY = "setting"
_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"0", "false", "no"})


@dataclass(frozen=True, slots=True)
class Setting:
    """What values a field takes. ``None`` is accepted exactly when it is the default."""

    kind: type
    doc: str
    optional: bool = False
    at_least: float | None = None
    above: float | None = None

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.kind is bool:
            return isinstance(value, bool)
        kinds = (int, float) if self.kind is float else (self.kind,)
        if isinstance(value, bool) or not isinstance(value, kinds):
            return False
        return (self.at_least is None or value >= self.at_least) and (self.above is None or value > self.above)

    def parse(self, raw: str) -> Any:
        """The value a variable's text stands for; ValueError if it stands for none (a bool
        is one of ``1 true yes`` or ``0 false no``, as ``bool("false")`` would not say)."""
        if self.kind is not bool:
            return self.kind(raw)
        word = raw.strip().lower()
        if word not in _TRUE | _FALSE:
            raise ValueError(raw)
        return word in _TRUE

    @property
    def type_name(self) -> str:
        return {int: "int", float: "number", str: "string"}.get(self.kind, self.kind.__name__)

    @property
    def bound(self) -> str:
        """The range as the docs and error messages write it, e.g. ``>= 1``."""
        if self.at_least is not None:
            return f">= {self.at_least:g}"
        return f"> {self.above:g}" if self.above is not None else ""

    def describe(self) -> str:
        """E.g. ``an int >= 1 or None``: what the error says a value must be."""
        article = "an" if self.type_name[0] in "aeiou" else "a"
        text = " ".join(part for part in (article, self.type_name, self.bound) if part)
        return text + " or None" if self.optional else text


def setting(
    default: Any = MISSING,
    *,
    kind: type,
    doc: str,
    at_least: float | None = None,
    above: float | None = None,
    factory: Any = MISSING,
) -> Any:
    """A dataclass field declared with its type, range and description."""
    declared = Setting(kind, doc, default is None, at_least, above)
    return dataclasses.field(default=default, default_factory=factory, metadata={_KEY: declared})


def declared(field: dataclasses.Field[Any]) -> Setting:
    return field.metadata[_KEY]


def check(instance: Any) -> None:
    """Raise :class:`ConfigError` for the first field of ``instance`` outside its declaration;
    called from ``__post_init__`` so a bad value fails where it is set."""
    for field in dataclasses.fields(instance):
        check_value(field, getattr(instance, field.name))


def check_value(field: dataclasses.Field[Any], value: Any, name: str | None = None) -> None:
    rule = declared(field)
    if not rule.accepts(value):
        raise ConfigError(f"{name or field.name} must be {rule.describe()}, got {value!r}")
