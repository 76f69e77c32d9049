"""Images for terminal tasks that bring their own Dockerfile, built when their base can be had.

The task's environment (its Dockerfile and build context) is built as Terminal-Bench and
Harbor build it, then adapted for gem-sandbox's sandboxes, whose root file system is read-only
and whose work dir is a fresh tmpfs at every start: what the image keeps in ``/app`` moves to
:data:`TASK_APP`, from which each episode copies it into the work dir; ``/app``, ``/tests``
and ``/logs`` become the project image's links; pytest is installed when the image lacks it;
the container runs as root with no entrypoint, so the agent can start (the image needs
``python3`` and ``bash``). The tag is a hash of the task's build context, so an unchanged
task is built once per daemon. A base image that cannot be pulled (no registry) or a failing
``RUN`` raises :class:`TaskImageUnavailable`.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from contextlib import closing

from gem_sandbox.sandbox.errors import SandboxError

from .tasks import TerminalTask

REPOSITORY = "gem-sandbox/task"
TASK_APP = "/opt/gem-sandbox/task-app"
BUILD_TIMEOUT = 1800  # seconds for one build call: a task image may install a lot
_ADAPTER = f"""FROM {{base}}
USER root
RUN set -e; mkdir -p {TASK_APP} /opt/gem-sandbox/gem_agent /work; \\
    if [ -d /app ] && [ ! -L /app ]; then cp -a /app/. {TASK_APP}/; fi; \\
    rm -rf /app /tests /logs; ln -s /work /app; \\
    ln -s /tmp/gem-sandbox-tests /tests; ln -s /tmp/gem-sandbox-logs /logs; \\
    python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --no-cache-dir pytest
ENTRYPOINT []
WORKDIR /work
"""
#: The episode's setup on a task image: the image's /app, copied into the work dir so that
#: every run's uid can change it (files of another uid would not be).
COPY_APP = f"""shopt -s dotglob nullglob
for entry in {TASK_APP}/*; do
  cp -R --preserve=mode,timestamps "$entry" . && chmod -R g+w "./${{entry##*/}}"
done
"""


class TaskImageUnavailable(SandboxError, RuntimeError):
    """A task's own image could not be built: its base cannot be pulled (no registry), or a
    step of its Dockerfile failed. The message has the daemon's reason."""


def task_tag(task: TerminalTask) -> str:
    """``gem-sandbox/task-<name>:<hash12>`` over the build context's files and the adapter."""
    assert task.dockerfile is not None
    context = task.dockerfile.parent
    digest = hashlib.sha256(_ADAPTER.encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(path.relative_to(context).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in task.name.lower())
    return f"{REPOSITORY}-{name}:{digest.hexdigest()[:12]}"


def build_task_image(task: TerminalTask, progress: Callable[[str], None] | None = None) -> str:
    """The adapted image of ``task`` (built unless its tag exists); blocking."""
    import docker
    import docker.errors

    tag = task_tag(task)
    with closing(docker.from_env(timeout=BUILD_TIMEOUT)) as client:
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        assert task.dockerfile is not None
        try:
            base = _build(client, progress, path=str(task.dockerfile.parent), dockerfile=task.dockerfile.name)
            _build(client, progress, fileobj=io.BytesIO(_ADAPTER.format(base=base).encode()), tag=tag)
        except docker.errors.DockerException as exc:  # a pull the daemon could not make, a dead daemon
            raise TaskImageUnavailable(f"building the image of task {task.name} failed: {exc}") from None
    return tag


def _build(client: object, progress: Callable[[str], None] | None, **options: object) -> str:
    """One ``docker build``; the id of the image it made."""
    image_id = None
    for chunk in client.api.build(rm=True, forcerm=True, decode=True, **options):  # type: ignore[attr-defined]
        if "error" in chunk:
            where = options.get("path") or "the adapter"
            raise TaskImageUnavailable(f"building {where} failed: {chunk['error'].strip()}")
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        line = chunk.get("stream", "").strip()
        if progress is not None and line.startswith("Step "):
            progress(line)
    if image_id is None:
        raise TaskImageUnavailable(f"docker build of {options.get('path') or 'the adapter'} made no image")
    return image_id
