"""The sandbox image: tagged by its inputs, built once, found by the backend."""

from __future__ import annotations

import pytest

# Without the Docker SDK these tests skip, saying why, instead of failing to import.
pytest.importorskip("docker", reason="needs the docker Python package: pip install -e '.[test]'")

import shutil
import time
from pathlib import Path

from gem_sandbox.sandbox.backends.docker import images
from gem_sandbox.sandbox.backends.base import SandboxSpec
from gem_sandbox.sandbox.backends.docker import DockerBackend
from gem_sandbox.sandbox.client import open_sandbox
from tests.docker_fixtures import backend, docker_client, sandbox_image, spec  # noqa: F401

pytestmark = pytest.mark.docker


def test_a_second_build_is_a_no_op(sandbox_image: str) -> None:
    lines: list[str] = []
    started = time.monotonic()
    assert images.build(progress=lines.append) == sandbox_image
    assert time.monotonic() - started < 1.0
    assert lines == [f"{sandbox_image} is up to date"]


def test_the_image_is_tagged_by_content_and_as_latest(sandbox_image: str, docker_client) -> None:
    assert sandbox_image == images.current_tag()
    assert (
        docker_client.images.get(sandbox_image).id
        == docker_client.images.get(f"{images.REPOSITORY}:latest").id
    )


def test_the_tag_follows_the_build_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = tmp_path / "sandbox"
    shutil.copytree(images.context_dir(), context)
    monkeypatch.setattr(images, "context_dir", lambda profile="default": context)
    before = images.current_tag()
    with open(context / "packages.txt", "a") as packages:
        packages.write("jq\n")
    assert images.current_tag() != before


def test_the_polyglot_image_is_of_its_own_repository_and_context() -> None:
    # A polyglot build is never the newest "gem-sandbox/sandbox" image the backend picks.
    assert images.current_tag("polyglot").startswith("gem-sandbox/polyglot:")
    assert images.context_dir("polyglot").name == "polyglot"
    default = set(images._packages(images.context_dir()))
    assert default < set(images._packages(images.context_dir("polyglot")))


def test_an_unknown_profile_is_refused_naming_the_profiles() -> None:
    with pytest.raises(ValueError, match="default, polyglot"):
        images.current_tag("cobol")


def test_both_profiles_build_with_the_same_recipe() -> None:
    # Same config lines (the offline import copies them) and base, so the two paths agree.
    for profile in images.PROFILES:
        context = images.context_dir(profile)
        assert images._base_image(context) == "debian:bookworm-slim"
        assert images._config_changes(context) == images._config_changes(images.context_dir())


def test_the_backend_default_is_the_built_image(sandbox_image: str) -> None:
    assert images.default_image() == sandbox_image
    status = images.image_status()
    assert (status.tag, status.built, status.newest) == (sandbox_image, True, sandbox_image)


def test_the_image_config_matches_the_dockerfile(sandbox_image: str, docker_client) -> None:
    config = docker_client.images.get(sandbox_image).attrs["Config"]
    assert config["WorkingDir"] == "/work"
    assert config["Cmd"] == ["sleep", "infinity"]
    assert "LANG=C.UTF-8" in config["Env"]


def test_the_host_debian_mirror_is_found() -> None:
    if not Path("/etc/debian_version").exists():
        pytest.skip("not a Debian-family host")
    mirror, suite = images.debian_source()
    assert mirror.startswith(("http://", "https://")) and suite


@pytest.mark.anyio
async def test_the_image_has_python_numpy_sympy_bash_and_gpp(
    backend: DockerBackend, spec: SandboxSpec
) -> None:
    async with open_sandbox(backend, spec) as sandbox:
        py = await sandbox.run(
            "import numpy, sympy; print(numpy.arange(4).sum(), sympy.factor('x**2-1'))"
        )
        assert py.stdout == "6 (x - 1)*(x + 1)\n", py.stderr
        sh = await sandbox.run(
            "echo $BASH_VERSION | cut -d. -f1; ps -o comm= -p $$", language="bash"
        )
        assert sh.stdout == "5\nbash\n", sh.stderr
        cpp = await sandbox.run(
            "printf '#include <iostream>\\nint main(){std::cout<<6*7<<std::endl;}' > t.cc"
            " && g++ -O0 -o t t.cc && ./t",
            language="bash",
            timeout=60,
        )
        assert cpp.stdout == "42\n", cpp.stderr
