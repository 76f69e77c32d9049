"""Who made a container, and finding the ones whose maker died (orphans) to remove them.

Containers outlive the process that made them: a crashed owner leaves its containers
running, holding memory and uids. Every container is therefore labelled with its pool and
its owner (:mod:`..owners`), so any later process on the same host can tell which ones no one
owns any more.
"""

from __future__ import annotations

import time

import docker

from gem_sandbox.sandbox.backends.base import POOL_LABEL, SandboxSpec
from gem_sandbox.sandbox.backends.owners import owner_id, owner_is_dead

OWNER_LABEL = "gem-sandbox.owner"
CREATED_LABEL = "gem-sandbox.created"


def labels(spec: SandboxSpec) -> dict[str, str]:
    """A new container's labels: the spec's, which may name the pool (else "default") but
    not the owner or the creation time."""
    return {
        POOL_LABEL: "default",
        **spec.labels,
        OWNER_LABEL: owner_id(),
        CREATED_LABEL: str(int(time.time())),
    }


def orphans(api: docker.APIClient, pool_label: str | None) -> list[str]:
    """The ids of containers (of ``pool_label``, or of any pool) whose owner is dead."""
    wanted = [OWNER_LABEL] + ([f"{POOL_LABEL}={pool_label}"] if pool_label else [])
    found = api.containers(all=True, filters={"label": wanted})
    return [c["Id"] for c in found if owner_is_dead(c["Labels"][OWNER_LABEL])]
