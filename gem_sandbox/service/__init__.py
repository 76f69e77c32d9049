"""The self-hosted pool service: one pool behind an HTTP API with tokens, quotas, leases,
metrics and SandboxFusion's routes (docs/service.md). It uses the sandbox layer; nothing
below imports it (the remote runtime, :mod:`gem_sandbox.sandbox.remote`, speaks to it over HTTP).
"""

from gem_sandbox.service.options import ServeOptions, TokenPolicy, load
from gem_sandbox.service.server import running, serve

__all__ = ["ServeOptions", "TokenPolicy", "load", "running", "serve"]
