"""The e2b-compatible endpoint (``gem-sandbox serve --e2b-compatible``; docs/service.md): the
unmodified ``e2b`` and ``e2b-code-interpreter`` SDKs, pointed at the service with
``E2B_API_URL`` and ``E2B_SANDBOX_URL``, create and use sandboxes of our pool.

:data:`ROUTES` is every route, each an :class:`~.wire.Endpoint` that says how it authenticates
and how its errors look; the app mounts them when the setting is on. A module per part of
e2b's API: :mod:`.control` (REST), :mod:`.snapshots` (pause, snapshots and fork, kept by
:mod:`.kept`) and :mod:`.metrics`; :mod:`.envd` (routing by sandbox, paths, ``/health``);
:mod:`.files`; :mod:`.filesystem`, :mod:`.process` and :mod:`.watch` (Connect RPCs, framed
by :mod:`.connect`); :mod:`.interpreter` (``/execute`` and contexts). A path of e2b's APIs
this endpoint does not serve answers in e2b's shapes too (:func:`~.wire.render_for`,
:func:`~.wire.unserved`).
"""

from gem_sandbox.service.e2b import control, envd, files, filesystem, interpreter, metrics, process, snapshots, watch
from gem_sandbox.service.e2b.wire import Endpoint, render_for, unserved

ROUTES: tuple[Endpoint, ...] = (
    *control.ROUTES,
    *envd.ROUTES,
    *files.ROUTES,
    *filesystem.ROUTES,
    *interpreter.ROUTES,
    *metrics.ROUTES,
    *process.ROUTES,
    *snapshots.ROUTES,
    *watch.ROUTES,
)

__all__ = ["ROUTES", "Endpoint", "render_for", "unserved"]
