"""Any catalogue env as an OpenEnv server, built on openenv-core's own server code.

OpenEnv's clients (``GenericEnvClient``, TRL's OpenEnv path) speak to a FastAPI app that
openenv-core builds around an ``Environment`` factory: each WebSocket session (``/ws``) gets an
environment of its own, made by the factory and closed when the session ends, however it ends.
:class:`GemEnvironment` is that environment for a gem-sandbox env: the env made and wrapped as
:class:`SessionHost` says, its tool sandboxes leased from the one
:class:`~gem_sandbox.runtime.Runtime` the server owns, so a session that ends (or a client that
vanishes) gives its sandboxes back.

The messages follow OpenEnv's text-env convention (its TextArena env's): the action is
``{"message": "<model text>"}``; the observation's ``prompt`` is GEM's observation text, with
``reward`` and ``done`` (terminated or truncated) beside it. GEM's ``info`` is the observation's
``metadata`` as OpenEnv's base class defines it, and also its ``info`` field, because
openenv-core's serializer leaves ``metadata`` out of what it sends (0.3.0 does).

GEM envs are multi-turn, so an episode lives in a WebSocket session; OpenEnv's stateless HTTP
routes build a fresh env per request, so ``POST /reset`` returns a first observation and
``POST /step`` answers 409 (no episode running). ``GET /runtime`` reports the runtime's
statistics (sandboxes leased, idle, runs), which is how an operator sees sandboxes come back.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect

from gem_sandbox import __version__
from gem_sandbox.core import Env, ResetNeeded, aclose_env, areset_env, astep_env
from gem_sandbox.integrations.scoring import Scorer
from gem_sandbox.runtime import Runtime
from gem_sandbox.wrappers.wrapper_factory import WRAPPER_FACTORY, ToolWrapperEntry

__all__ = ["GemAction", "GemEnvironment", "GemObservation", "GemState", "SessionHost", "create_app", "serve"]


class GemAction(Action):
    """The model's text for one turn."""

    message: str = Field(description="the model's completion for this turn, given to the env's step()")


class GemObservation(Observation):
    """GEM's observation text as ``prompt``; ``info`` is GEM's info (also in ``metadata``)."""

    prompt: str = Field(default="", description="the env's observation text (GEM's obs)")
    info: dict[str, Any] = Field(default_factory=dict, description="GEM's info dict for this turn")
    terminated: bool = Field(default=False, description="GEM's terminated (done is terminated or truncated)")
    truncated: bool = Field(default=False, description="GEM's truncated")


class GemState(State):
    """OpenEnv's episode id and step count, and which env and seed this session plays."""

    env_id: str
    seed: int | None = None


@dataclass
class SessionHost:
    """What every session's env is made of, and the runtime (and event loop) they share.

    ``wrappers`` are GEM's wrapper-factory names, applied in order (``"python_tool,concat"``);
    ``tool_options`` go to the tool wrappers (:class:`ToolEnvWrapper`'s extensions, e.g.
    ``{"json_tool_calls": True}``). ``stateful`` gives the Python tool one kernel per episode
    (variables persist between calls), on a sandbox the episode leases until it ends. Build it
    on the runtime's loop: sessions' closes are sent there."""

    env_id: str
    runtime: Runtime
    wrappers: str = ""
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    tool_options: Mapping[str, Any] = field(default_factory=dict)
    stateful: bool = False
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    _closing: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        """Refuse an unknown wrapper name here, before any client waits on a session."""
        names = [name for name in (w.strip() for w in self.wrappers.split(",")) if name]
        unknown = [name for name in names if name not in WRAPPER_FACTORY]
        if unknown:
            raise ValueError(f"unknown wrapper {unknown[0]!r}; known: {', '.join(sorted(WRAPPER_FACTORY))}")
        tools = [name for name in names if isinstance(WRAPPER_FACTORY[name], ToolWrapperEntry)]
        if self.stateful and tools not in (["python_tool"], ["python_tool_no_int_reward"]):
            raise ValueError(f"stateful applies to one python_tool wrapper (python_tool or python_tool_no_int_reward); got {tools}")

    def build(self) -> Env:
        """A new env for one session: made, then wrapped, its tools on the shared runtime."""
        options = dict(self.tool_options)
        if self.stateful:
            from gem_sandbox.tools.python_code_tool import PythonCodeTool

            options["tools"] = [PythonCodeTool(timeout=5, stateful=True, runtime=self.runtime)]
        scorer = Scorer(self.env_id, runtime=self.runtime, wrappers=self.wrappers, tool_options=options, **self.env_kwargs)
        return scorer.make_env()

    def close_soon(self, env: Env) -> None:
        """Close ``env`` on the runtime's loop, from whichever thread openenv-core closes it:
        from a worker thread, wait for it; on the loop itself (its stateless HTTP routes close
        inline), as a task that :meth:`wait_closed` collects."""
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            task = self.loop.create_task(aclose_env(env))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        else:
            asyncio.run_coroutine_threadsafe(aclose_env(env), self.loop).result()

    async def wait_closed(self) -> None:
        """Wait for closes still running (before the runtime they release into closes)."""
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class GemEnvironment(Environment[GemAction, GemObservation, GemState]):
    """One session's env, played through OpenEnv's ``reset``/``step`` on the server's loop."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own env; sandboxes are leased per episode

    def __init__(self, host: SessionHost) -> None:
        super().__init__()
        self._host = host
        self._env = host.build()
        self._state = GemState(env_id=host.env_id)

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GemObservation:
        obs, info = await areset_env(self._env, seed=seed, **kwargs)
        self._state = GemState(env_id=self._host.env_id, seed=seed, episode_id=episode_id or uuid.uuid4().hex)
        return _observation(obs, None, False, False, info)

    async def step_async(self, action: GemAction, timeout_s: float | None = None, **kwargs: Any) -> GemObservation:
        obs, reward, terminated, truncated, info = await astep_env(self._env, action.message)
        self._state.step_count += 1
        return _observation(obs, float(reward), bool(terminated), bool(truncated), info)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GemObservation:
        raise NotImplementedError("the server calls reset_async")

    def step(self, action: GemAction, timeout_s: float | None = None, **kwargs: Any) -> GemObservation:
        raise NotImplementedError("the server calls step_async")

    @property
    def state(self) -> GemState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        wrapped = f" with wrappers {self._host.wrappers}" if self._host.wrappers else ""
        return EnvironmentMetadata(
            name=self._host.env_id,
            description=f"gem-sandbox env {self._host.env_id}{wrapped}; action {{'message': text}}",
            version=__version__,
        )

    def close(self) -> None:
        """Called by openenv-core when the session ends: the env (and its sandboxes) goes back."""
        self._host.close_soon(self._env)


def _observation(obs: Any, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]) -> GemObservation:
    info = _jsonable(info)
    return GemObservation(
        prompt=obs if isinstance(obs, str) else str(obs),
        reward=reward,
        done=terminated or truncated,
        terminated=terminated,
        truncated=truncated,
        info=info,
        metadata=info,
    )


def _jsonable(info: Mapping[str, Any]) -> dict[str, Any]:
    """GEM's info as JSON can carry it: numpy scalars as numbers, anything else as text."""
    return json.loads(json.dumps(dict(info), default=lambda value: value.item() if hasattr(value, "item") else str(value)))


def create_app(host: SessionHost, max_sessions: int) -> FastAPI:
    """openenv-core's routes (its ``HTTPEnvServer``) serving ``host``'s env to at most
    ``max_sessions`` sessions at once; one more is refused at the WebSocket handshake with
    HTTP 503 (OpenEnv's ``CAPACITY_REACHED`` error in the body), never queued."""
    app = FastAPI(title=f"gem-sandbox OpenEnv server: {host.env_id}", version=__version__)
    sessions = HTTPEnvServer(
        functools.partial(GemEnvironment, host), GemAction, GemObservation, max_concurrent_envs=max_sessions
    )
    sessions.register_routes(app)
    app.add_middleware(_RefuseWhenFull, sessions=sessions)
    app.add_middleware(_QuietDisconnect)

    @app.exception_handler(ResetNeeded)
    async def _no_episode(request: Request, exc: ResetNeeded) -> JSONResponse:
        return JSONResponse(
            status_code=409,
            content={"detail": f"{exc}; an episode lives in a WebSocket session (/ws), as OpenEnv's clients open"},
        )

    @app.get("/runtime", tags=["Health"], summary="The sandbox runtime's statistics")
    async def _runtime() -> dict[str, Any]:
        return {"backend": host.runtime.backend, **host.runtime.statistics().as_dict()}

    return app


class _RefuseWhenFull:
    """Refuse a session past the limit before the handshake completes. openenv-core accepts
    the socket, sends its ``CAPACITY_REACHED`` error and closes at once, so its own client,
    sending its first message, sees only a closed connection; a refused handshake reaches it
    as a ``ConnectionError`` naming HTTP 503. Two connects racing for the last slot still meet
    openenv-core's own check."""

    def __init__(self, app: ASGIApp, sessions: HTTPEnvServer) -> None:
        self.app = app
        self.sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        full = self.sessions.active_sessions >= self.sessions.max_concurrent_envs
        if full and scope["type"] == "websocket" and scope["path"] == "/ws" and "websocket.http.response" in scope.get("extensions", {}):
            refusal = {
                "message": f"server at capacity: {self.sessions.active_sessions}/{self.sessions.max_concurrent_envs} sessions active; retry when one ends",
                "code": "CAPACITY_REACHED",
            }
            await JSONResponse(refusal, status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _QuietDisconnect:
    """Drop the ``WebSocketDisconnect`` openenv-core's session handler raises when it closes a
    socket the client already closed (every normal end of a session, in 0.3.0): the session
    was destroyed before, and uvicorn would log each one as an application error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


async def serve(
    env_id: str,
    *,
    wrappers: str = "",
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 8,
    backend: str | None = None,
    runtime_options: Mapping[str, Any] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    tool_options: Mapping[str, Any] | None = None,
    stateful: bool = False,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve ``env_id`` until the process is told to stop, its sandboxes from one runtime
    (``backend`` and ``runtime_options``: :class:`~gem_sandbox.runtime.Runtime`'s) opened here
    and closed on the way out. One env is built and closed first, so an unknown id, wrapper
    or env keyword fails here, not in a client's session. ``announce`` gets the base URL once
    the port is bound (``port=0`` picks a free one)."""
    async with Runtime(backend, **(runtime_options or {})) as runtime:
        sessions = SessionHost(env_id, runtime, wrappers, env_kwargs or {}, tool_options or {}, stateful)
        await aclose_env(await asyncio.to_thread(sessions.build))
        listener = _listen(host, port)
        app = create_app(sessions, max_sessions)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
        if announce is not None:
            bound_host, bound_port = listener.getsockname()[:2]
            announce(f"http://{bound_host}:{bound_port}" if ":" not in bound_host else f"http://[{bound_host}]:{bound_port}")
        try:
            await server.serve(sockets=[listener])
        finally:
            await sessions.wait_closed()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family)
