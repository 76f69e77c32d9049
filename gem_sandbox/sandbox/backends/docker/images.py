"""Build the sandbox images, with or without a container registry.

Each profile is a build context (``Dockerfile``, ``packages.txt``) in the repository's
``images/``: ``default`` (``images/sandbox/``: python, bash, g++) and ``polyglot``
(``images/polyglot/``: a compiler or runtime for every language Debian provides of those
SandboxFusion serves), an image of its own repository so that it is never taken for the
default one. The contexts are installed as package data of ``gem_sandbox_images``, so a checkout, an editable install, a wheel
and an sdist all find it through :mod:`importlib.resources` and build the same image. Two paths
install the same ``packages.txt`` onto Debian:

* the ordinary one, ``docker build`` of the ``Dockerfile``, when its ``FROM`` base image is
  already present locally;
* the offline one (no registry needed, only the host's Debian mirror): ``debootstrap`` a minimal
  root filesystem, ``apt-get install`` the packages in it as the Dockerfile does, trim it, and
  import it as an image through the Docker API with the Dockerfile's ``ENV``/``WORKDIR``/``CMD``
  lines as the image config.

Images are tagged by a content hash of the build inputs (``gem-sandbox/sandbox:<hash12>``, plus
``:latest``; ``gem-sandbox/polyglot:...`` for the polyglot one), so an unchanged tree never rebuilds and a changed one never reuses a stale image.
The hash covers names and contents only, never install paths, so every install agrees on it.
The decision between the paths never probes the network: a missing base image means offline.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import docker
import docker.errors

from gem_sandbox.sandbox.errors import SandboxError

REPOSITORY = "gem-sandbox/sandbox"  # the default profile's
CONTEXT_PACKAGE = "gem_sandbox_images"  # the repository's images/, see pyproject.toml


@dataclass(frozen=True)
class Profile:
    """An image: its build context (a directory of ``images/``) and its repository."""

    context: str
    repository: str


PROFILES = {
    "default": Profile("sandbox", REPOSITORY),
    "polyglot": Profile("polyglot", "gem-sandbox/polyglot"),
}

# Dockerfile instructions that are image config (not filesystem) and so carry over to an import.
_CONFIG_INSTRUCTIONS = ("ENV", "WORKDIR", "CMD", "ENTRYPOINT", "USER")
# Directories the Dockerfile's RUN line creates; the offline root needs them too.
_IMAGE_DIRS = ("work", "opt/gem-sandbox/gem_agent")
# The links the Dockerfile's RUN line makes (name -> target): terminal tasks' paths and e2b's
# home dir.
_IMAGE_LINKS = {
    "app": "/work",
    "home/user": "/work",
    "tests": "/tmp/gem-sandbox-tests",
    "logs": "/tmp/gem-sandbox-logs",
}
# What the Dockerfile's RUN line deletes (package indexes, caches, docs, translations), plus
# debootstrap's logs.
_TRIM = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "var/log",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
)
# "deb [options] uri suite component...", the one-line sources.list format
_ONE_LINE_SOURCE = re.compile(
    r"^deb\s+(?:\[[^\]]*\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)(?P<components>[^#\n]*)", re.M
)
_TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # debootstrap lives in sbin, often not on PATH
_HEARTBEAT_S = 15.0
_BUILD_API_TIMEOUT_S = 1800  # importing or building a few hundred MB is one long API call


class ImageBuildError(SandboxError, RuntimeError):
    """The build failed on this machine (apt sources, debootstrap, the daemon's build); the
    message says where to look. A SandboxError, so the CLI reports it in one line."""


@dataclass(frozen=True)
class ImageStatus:
    """Whether the image for the current build inputs exists, and what backends would use."""

    tag: str  # the tag the current inputs produce
    built: bool  # that tag is present locally
    newest: str | None  # the newest gem-sandbox image present (``default_image()``)


def build(
    offline: bool | None = None,
    *,
    force: bool = False,
    progress: Callable[[str], None] = print,
    profile: str = "default",
) -> str:
    """Build a profile's image unless the tag for its current inputs exists; return that tag.

    ``offline=None`` uses the Dockerfile when its base image is present locally, else
    debootstrap. ``force`` rebuilds even when the tag exists.
    """
    tag = current_tag(profile)
    context = context_dir(profile)
    with closing(docker.from_env(timeout=_BUILD_API_TIMEOUT_S)) as client:
        if not force and _image_exists(client, tag):
            client.images.get(tag).tag(_profile(profile).repository, "latest")  # back, if it moved
            progress(f"{tag} is up to date")
            return tag
        if offline is None:
            offline = not _image_exists(client, _base_image(context))
            if offline:
                progress(f"{_base_image(context)} is not present locally: building offline")
        started = time.monotonic()
        if offline:
            _build_offline(client, context, tag, progress)
        else:
            _build_dockerfile(client, context, tag, progress)
        client.images.get(tag).tag(_profile(profile).repository, "latest")
    progress(f"built {tag} in {_elapsed(started)}")
    return tag


def default_image(profile: str = "default") -> str | None:
    """The image of a profile's current build inputs when it is present, else the newest one
    present (its hash tag); ``None`` if none or no daemon. Not simply the newest: an image
    built from other inputs (an edited package list, since put back) may be newer."""
    repository = _profile(profile).repository
    try:
        with closing(docker.from_env()) as client:
            current = current_tag(profile)
            if _image_exists(client, current):
                return current
            images = client.images.list(name=repository)
    except docker.errors.DockerException:
        return None
    newest = max(images, key=lambda image: image.attrs["Created"], default=None)
    if newest is None or not newest.tags:
        return None
    return min(newest.tags, key=lambda t: t.endswith(":latest"))  # the hash tag when it has one


def image_status(profile: str = "default") -> ImageStatus:
    """The expected tag, whether it is built, and the newest image present. Raises
    ``docker.errors.DockerException`` when no daemon answers."""
    tag = current_tag(profile)
    with closing(docker.from_env()) as client:
        built = _image_exists(client, tag)
    return ImageStatus(tag=tag, built=built, newest=default_image(profile))


def context_dir(profile: str = "default") -> Path:
    """A profile's build context directory as installed (a real directory: ``docker build``
    reads it)."""
    reinstall = "reinstall gem-sandbox (in a checkout: `pip install -e .`)"
    try:
        context = files(CONTEXT_PACKAGE) / _profile(profile).context
    except ModuleNotFoundError:
        raise FileNotFoundError(
            f"the image build context ({CONTEXT_PACKAGE}) is not installed; {reinstall}"
        ) from None
    if not isinstance(context, Path) or not (context / "Dockerfile").is_file():
        raise FileNotFoundError(f"no Dockerfile in {context}; {reinstall}")
    return context


def current_tag(profile: str = "default") -> str:
    """``<repository>:<hash12>`` over the profile's build context files, then this recipe."""
    context = context_dir(profile)
    # The files that ship (pyproject's ``sandbox/*``: top-level, not hidden), in name order.
    shipped = sorted(p for p in context.iterdir() if p.is_file() and not p.name.startswith("."))
    digest = hashlib.sha256()
    for path in [*shipped, Path(__file__)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{_profile(profile).repository}:{digest.hexdigest()[:12]}"


def debian_source() -> tuple[str, str]:
    """``(mirror URI, suite)`` of the host's own Debian (or Ubuntu) release from its apt sources."""
    release = _os_release()
    suite = release.get("VERSION_CODENAME", "")
    for uri, suites, components in _apt_sources():
        if suite in suites and "main" in components:
            return uri, suite
    raise ImageBuildError(
        f"no apt source for the host's release {suite!r} with component 'main' in "
        f"/etc/apt/sources.list*; add one, or `docker pull {_base_image(context_dir())}` to "
        "build from the Dockerfile"
    )


# --- the two build paths -------------------------------------------------------------------


def _build_dockerfile(
    client: docker.DockerClient, context: Path, tag: str, progress: Callable[[str], None]
) -> None:
    progress(f"building {tag} from {context / 'Dockerfile'}")
    for chunk in client.api.build(
        path=str(context), tag=tag, rm=True, forcerm=True, pull=False, decode=True
    ):
        if "error" in chunk:
            raise ImageBuildError(f"docker build of {tag} failed: {chunk['error'].strip()}")
        line = chunk.get("stream", "").strip()
        if line.startswith("Step "):
            progress(f"  {line}")


def _build_offline(
    client: docker.DockerClient, context: Path, tag: str, progress: Callable[[str], None]
) -> None:
    if os.geteuid() != 0:
        raise PermissionError(
            "the offline build runs debootstrap, which needs root; run it as root, or "
            f"`docker pull {_base_image(context)}` to build from the Dockerfile"
        )
    if shutil.which("debootstrap", path=_TOOL_PATH) is None:
        raise FileNotFoundError("the offline build needs debootstrap: apt-get install debootstrap")
    mirror, suite = debian_source()
    cache = _cache_dir()
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    log_path = cache / f"debootstrap-{tag.partition(':')[2]}.log"
    log_path.write_text("")
    step = _Steps(progress, total=4)
    build_dir = Path(tempfile.mkdtemp(prefix="rootfs-", dir=cache))
    root = build_dir / "root"
    try:
        with step(f"debootstrap {suite} from {mirror} (log: {log_path})"):
            argv = ["debootstrap", "--variant=minbase", f"--cache-dir={debs}", suite, str(root), mirror]
            _logged(argv, log_path, progress)
        with step("apt-get install of packages.txt in the new root"):
            _apt_install(root, _packages(context), debs, log_path, progress)
        with step("trimming docs, caches and package lists"):
            _trim(root)
        with step(f"importing the root filesystem as {tag}"):
            _import(client, root, tag, _config_changes(context))
    finally:
        _remove_build_dir(build_dir)


def _apt_install(
    root: Path, packages: list[str], debs: Path, log_path: Path, progress: Callable[[str], None]
) -> None:
    """What the Dockerfile's ``RUN`` line does, in a chroot of the root: apt resolves the
    packages (debootstrap's own resolver does not follow alternatives and virtual packages),
    with the host's resolver config lent for the while. The ``.deb`` cache is shared by hard
    links, so that builds running at once never contend for apt's lock on one directory."""
    archives = root / "var/cache/apt/archives"
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    _link_debs(debs, archives)
    shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
    proc = root / "proc"
    subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
    try:
        chroot = ["chroot", str(root)]
        _logged([*chroot, "apt-get", "update"], log_path, progress)
        install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
        _logged([*chroot, *install], log_path, progress)
    finally:
        subprocess.run(["umount", "--lazy", str(proc)], check=False, capture_output=True)
        (root / "etc/resolv.conf").unlink(missing_ok=True)
    _link_debs(archives, debs)


def _link_debs(source: Path, dest: Path) -> None:
    for deb in source.glob("*.deb"):
        if not (dest / deb.name).exists():
            os.link(deb, dest / deb.name)


def _logged(argv: list[str], log_path: Path, progress: Callable[[str], None]) -> None:
    """Run ``argv`` with its output appended to the log, reporting its last line now and then."""
    env = {"PATH": _TOOL_PATH, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    started = time.monotonic()
    with open(log_path, "a") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        while proc.poll() is None:
            try:
                proc.wait(_HEARTBEAT_S)
            except subprocess.TimeoutExpired:
                progress(f"  {_elapsed(started)}: {_last_line(log_path)}")
    if proc.returncode != 0:
        raise ImageBuildError(
            f"{argv[0]} failed (exit {proc.returncode}): {_last_line(log_path)}; see {log_path}"
        )


def _trim(root: Path) -> None:
    for rel in _TRIM:
        for child in (root / rel).glob("*"):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    for rel in _IMAGE_DIRS:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for name, target in _IMAGE_LINKS.items():
        (root / name).unlink(missing_ok=True)
        (root / name).symlink_to(target)


def _import(client: docker.DockerClient, root: Path, tag: str, changes: list[str]) -> None:
    """Stream ``tar`` of the root straight into the daemon (no tarball on disk)."""
    repo, _, version = tag.partition(":")
    # Docker supplies /dev, /proc and /sys itself; debootstrap's device nodes stay out.
    argv = [
        "tar",
        "--numeric-owner",
        "--exclude=./dev/*",
        "--exclude=./proc/*",
        "--exclude=./sys/*",
        "-C",
        str(root),
        "-cf",
        "-",
        ".",
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as tar:
        client.api.import_image(
            src=tar.stdout, repository=repo, tag=version, changes=changes, stream_src=True
        )
    if tar.returncode != 0:
        raise ImageBuildError(f"tar of {root} failed with exit code {tar.returncode}")


# --- helpers -------------------------------------------------------------------------------


class _Steps:
    """Numbered progress lines with the time each step took."""

    def __init__(self, progress: Callable[[str], None], total: int) -> None:
        self._progress, self._total, self._done = progress, total, 0

    @contextmanager
    def __call__(self, what: str) -> Iterator[None]:
        self._done += 1
        label = f"[{self._done}/{self._total}]"
        self._progress(f"{label} {what}")
        started = time.monotonic()
        yield
        self._progress(f"{label} done in {_elapsed(started)}")


def _image_exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def _profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"no image profile {name!r}; there are {', '.join(PROFILES)}") from None


def _dockerfile_lines(context: Path) -> list[str]:
    return [line.strip() for line in (context / "Dockerfile").read_text().splitlines()]


def _base_image(context: Path) -> str:
    return next(line.split()[1] for line in _dockerfile_lines(context) if line.startswith("FROM "))


def _config_changes(context: Path) -> list[str]:
    lines = _dockerfile_lines(context)
    return [line for line in lines if line.split(" ", 1)[0] in _CONFIG_INSTRUCTIONS]


def _packages(context: Path) -> list[str]:
    lines = (context / "packages.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "gem-sandbox"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _os_release() -> dict[str, str]:
    fields = {}
    for line in Path("/etc/os-release").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value.strip().strip('"')
    return fields


def _apt_sources() -> Iterator[tuple[str, list[str], list[str]]]:
    """``(uri, suites, components)`` of every ``deb`` source, one-line and deb822 formats."""
    etc = Path("/etc/apt")
    for path in [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]:
        text = path.read_text() if path.is_file() else ""
        for match in _ONE_LINE_SOURCE.finditer(text):
            yield match["uri"], [match["suite"]], match["components"].split()
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                key, sep, value = line.partition(":")
                if sep and not line.startswith(("#", " ")):
                    fields[key.strip()] = value.strip()
            if "deb" in fields.get("Types", "").split():
                for uri in fields.get("URIs", "").split():
                    yield (
                        uri,
                        fields.get("Suites", "").split(),
                        fields.get("Components", "").split(),
                    )


def _remove_build_dir(directory: Path) -> None:
    """Unmount whatever debootstrap left mounted (/proc, /sys, a bound /dev) before deleting,
    so removing the root can never reach into the host's own filesystems."""
    for mount in _mounts_under(directory):
        subprocess.run(["umount", "--lazy", mount], check=False)
    if _mounts_under(directory):
        raise ImageBuildError(f"{directory} still has mounts; unmount them and delete it by hand")
    shutil.rmtree(directory, ignore_errors=True)


def _mounts_under(directory: Path) -> list[str]:
    prefix = f"{directory}/"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    return sorted((m for m in mounts if m.startswith(prefix)), reverse=True)


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no output yet)"


def _elapsed(started: float) -> str:
    seconds = time.monotonic() - started
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
