"""Templates: images an operator builds from a Dockerfile of their own, which the e2b-compatible
endpoint serves by name (``Sandbox.create(template="name")``; docs/service.md).

``gem-sandbox images build --template NAME --dockerfile PATH`` builds the Dockerfile as
``docker build`` would (its directory the context, ``network_mode="none"``, no pull: a base
image that is only local works offline), then adapts it for our sandboxes, whose root is
read-only and whose work dir is a fresh tmpfs: the agent's mount point and ``/work`` exist,
``/home/user`` links to ``/work`` (what the image kept in its ``/home/user`` moves to
:data:`TEMPLATE_HOME`, copied into each sandbox's work dir when it is created), the container
runs as root with no entrypoint so the agent can start (the image needs ``python3``). The
result is labelled with its name, which :func:`find_template` looks up.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import docker
import docker.errors

from gem_sandbox.sandbox.backends.docker.images import ImageBuildError

LABEL = "gem-sandbox.template"
REPOSITORY = "gem-sandbox/template"
TEMPLATE_HOME = "/opt/gem-sandbox/template-home"
BUILD_TIMEOUT = 1800  # seconds for one build call
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
_ADAPTER = f"""FROM {{base}}
USER root
RUN set -e; mkdir -p {TEMPLATE_HOME} /opt/gem-sandbox/gem_agent /work /home; \\
    if [ -d /home/user ] && [ ! -L /home/user ]; then cp -a /home/user/. {TEMPLATE_HOME}/; fi; \\
    rm -rf /home/user; ln -s /work /home/user
ENTRYPOINT []
WORKDIR /work
LABEL {LABEL}={{name}}
"""
#: What a sandbox of a template runs first: the template's home dir into its work dir, made
#: writable by every run's uid.
COPY_HOME = f"""shopt -s dotglob nullglob
for entry in {TEMPLATE_HOME}/*; do
  cp -R --preserve=mode,timestamps "$entry" . && chmod -R g+w "./${{entry##*/}}"
done
"""


def build_template(name: str, dockerfile: Path, progress: Callable[[str], None]) -> str:
    """Build the template ``name`` from ``dockerfile``; its tag. Blocking."""
    if not NAME.fullmatch(name):
        raise ImageBuildError(f"template name {name!r}: lowercase letters, digits, '-', '_' and '.', up to 63")
    if not dockerfile.is_file():
        raise ImageBuildError(f"{dockerfile}: no such Dockerfile")
    tag = f"{REPOSITORY}-{name}:latest"
    with closing(docker.from_env(timeout=BUILD_TIMEOUT)) as client:
        try:
            base = _build(client, progress, path=str(dockerfile.parent), dockerfile=dockerfile.name)
            adapter = _ADAPTER.format(base=base, name=name).encode()
            _build(client, progress, fileobj=io.BytesIO(adapter), tag=tag)
        except docker.errors.DockerException as exc:
            raise ImageBuildError(f"building template {name} failed: {exc}") from None
    return tag


def find_template(client: docker.DockerClient, name: str) -> str | None:
    """The id of the newest image built as template ``name``, or None."""
    images = client.images.list(filters={"label": f"{LABEL}={name}"})
    if not images:
        return None
    return max(images, key=lambda image: image.attrs.get("Created", "")).id


def _build(client: docker.DockerClient, progress: Callable[[str], None], **options: object) -> str:
    """One ``docker build`` with no network and no pull; the id of the image it made."""
    image_id = None
    for chunk in client.api.build(rm=True, forcerm=True, pull=False, network_mode="none", decode=True, **options):
        if "error" in chunk:
            raise ImageBuildError(f"docker build failed: {chunk['error'].strip()}")
        image_id = chunk.get("aux", {}).get("ID", image_id)
        line = chunk.get("stream", "").strip()
        if line.startswith("Step "):
            progress(f"  {line}")
    if image_id is None:
        raise ImageBuildError("docker build made no image")
    return image_id
