"""Environment registration by string id, with lazy ``module:Class`` entry points.

Environments come from the ``gem_sandbox.envs`` entry-point group: each entry point names a
function that calls :func:`register`. The shipped catalogue (``envs/``) and third-party
packages register the same way; the group is loaded once, on first lookup (reading
:data:`ENV_REGISTRY` is one), so that importing the library imports no env.

This is GEM's ``gem.envs.registration`` (re-exported there as
:mod:`gem_sandbox.envs.registration`).
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
from collections.abc import Callable, ItemsView, Iterator, KeysView, Sequence, ValuesView
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from gem_sandbox.core import Env

if TYPE_CHECKING:
    from gem_sandbox.vector import VectorEnv

ENTRY_POINT_GROUP = "gem_sandbox.envs"


class UnknownEnvError(ValueError, KeyError):
    """No environment is registered under the requested id. GEM raises ``ValueError``; this
    is one (and a ``KeyError``, a failed lookup by key, as it was here before)."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered environment."""

    id: str
    entry_point: Callable[..., Env] | str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Callable[..., Env]:
        if not isinstance(self.entry_point, str):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"cannot load {self.id!r} from {self.entry_point!r}: {exc}") from exc

    def source(self) -> str:
        """Where its data comes from (see :meth:`Env.describe_source`)."""
        env_class = self.load()
        describe = getattr(env_class, "describe_source", None)
        return describe(**self.kwargs) if describe is not None else "unknown"

    def make(self, **kwargs: Any) -> Env:
        env = self.load()(**{**self.kwargs, **kwargs})
        env.env_id = self.id
        env.entry_point = self.entry_point
        return env


class _Registry(dict[str, EnvSpec]):
    """GEM's ``ENV_REGISTRY``: every registered id and its spec. Reading it loads the
    entry-point group first, so it lists the catalogue as GEM's lists its envs."""

    def __getitem__(self, env_id: str) -> EnvSpec:
        load_plugins()
        return super().__getitem__(env_id)

    def __contains__(self, env_id: object) -> bool:
        load_plugins()
        return super().__contains__(env_id)

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return super().__iter__()

    def __len__(self) -> int:
        load_plugins()
        return super().__len__()

    def get(self, env_id: str, default: Any = None) -> Any:  # type: ignore[override]
        load_plugins()
        return super().get(env_id, default)

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        load_plugins()
        return super().keys()

    def values(self) -> ValuesView[EnvSpec]:  # type: ignore[override]
        load_plugins()
        return super().values()

    def items(self) -> ItemsView[str, EnvSpec]:  # type: ignore[override]
        load_plugins()
        return super().items()

    def __repr__(self) -> str:
        load_plugins()
        return super().__repr__()


ENV_REGISTRY: dict[str, EnvSpec] = _Registry()
_plugins_loaded = False


def register(env_id: str, entry_point: Callable[..., Env] | str, **kwargs: Any) -> EnvSpec:
    """Register ``entry_point`` (a callable or ``"module:Class"``) under ``env_id``."""
    if dict.__contains__(ENV_REGISTRY, env_id):  # registering loads no plugins
        raise ValueError(f"environment {env_id!r} is already registered")
    spec = EnvSpec(env_id, entry_point, dict(kwargs))
    ENV_REGISTRY[env_id] = spec
    return spec


def load_plugins() -> None:
    """Run every ``gem_sandbox.envs`` entry point once."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()()


def registered_envs() -> dict[str, EnvSpec]:
    load_plugins()
    return ENV_REGISTRY


def spec(env_id: str) -> EnvSpec:
    envs = registered_envs()
    try:
        return envs[env_id]
    except KeyError:
        close = difflib.get_close_matches(env_id, envs, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise UnknownEnvError(
            f"no environment {env_id!r} is registered{hint} (gem-sandbox envs lists them)"
        ) from None


def make(env_id: str, **kwargs: Any) -> Env:
    """Build the environment registered as ``env_id``; ``kwargs`` override its defaults.
    An unknown id raises :class:`UnknownEnvError`, a ``ValueError`` as in GEM."""
    return spec(env_id).make(**kwargs)


def make_vec(
    env_ids: str | Sequence[str],
    wrappers: Sequence[Callable[[Env], Env]] | None = None,
    vec_kwargs: Sequence[dict[str, Any]] | None = None,
    async_mode: bool = False,
    seed: int = 0,
    num_envs: int | None = None,
    **kwargs: Any,
) -> VectorEnv:
    """A vector of environments, env ``i`` seeded ``seed + i`` unless ``vec_kwargs`` says.

    ``env_ids`` is one id or one id per env (GEM's signature); ``num_envs`` repeats a single
    id. ``async_mode`` selects :class:`AsyncVectorEnv` (one event loop for every env). As in
    GEM, the vector env's ``env_fns[i]`` builds env ``i`` (made and wrapped); each is called
    once here.
    """
    from gem_sandbox.vector import AsyncVectorEnv, SyncVectorEnv

    ids = [env_ids] * (num_envs or 1) if isinstance(env_ids, str) else list(env_ids)
    if vec_kwargs is not None and len(vec_kwargs) != len(ids):
        raise ValueError(f"vec_kwargs has {len(vec_kwargs)} entries for {len(ids)} envs")

    def build(i: int) -> Env:
        env_kwargs = {"seed": seed + i, **(vec_kwargs[i] if vec_kwargs else {}), **kwargs}
        env = make(ids[i], **env_kwargs)
        for wrapper in wrappers or ():
            env = wrapper(env)
        return env

    cls = AsyncVectorEnv if async_mode else SyncVectorEnv
    return cls(ids, [partial(build, i) for i in range(len(ids))], seed=seed)


def matching_ids(pattern: str | None = None) -> list[str]:
    """Registered ids, sorted, filtered by a glob or substring ``pattern``."""
    ids = sorted(registered_envs())
    if not pattern:
        return ids
    glob = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
    return [i for i in ids if fnmatch.fnmatch(i.lower(), glob.lower())]


def print_envs(pattern: str | None = None) -> None:
    """Print the registered environments, one per line: the id, where its data comes from,
    and its default kwargs."""
    ids = matching_ids(pattern)
    if not ids:
        print("No environments registered." if not pattern else f"No environment matches {pattern!r}.")
        return
    sources = {env_id: ENV_REGISTRY[env_id].source() for env_id in ids}
    width, source_width = max(map(len, ids)), max(map(len, sources.values()))
    for env_id in ids:
        kwargs = ", ".join(f"{k}={v!r}" for k, v in ENV_REGISTRY[env_id].kwargs.items())
        print(f"{env_id:<{width}}  {sources[env_id]:<{source_width}}  {kwargs}".rstrip())
