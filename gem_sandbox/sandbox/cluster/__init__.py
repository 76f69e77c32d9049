"""Sandbox pools across a Ray cluster: a pool actor per node (:mod:`.node`), placed by
:mod:`.placement` (``gem-sandbox ray up``), and the client a runtime uses to lease across them
(:mod:`.client`). Needs the ``ray`` package (``pip install 'gem-sandbox[ray]'``); see
docs/scale-out.md."""

from gem_sandbox.sandbox.cluster.client import RayPool, RaySandbox
from gem_sandbox.sandbox.cluster.node import NAMESPACE, NodePool, NodeSettings

__all__ = ["NAMESPACE", "NodePool", "NodeSettings", "RayPool", "RaySandbox"]
