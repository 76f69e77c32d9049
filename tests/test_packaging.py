"""The wheel carries the whole library, the env catalogue and the sandbox image's build context."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMAGE_INPUTS = ("sandbox/Dockerfile", "sandbox/packages.txt")


def test_every_package_directory_is_listed_in_pyproject():
    """Packages (and data directories) are listed by hand because envs/ is renamed on install."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {name: ROOT / path for name, path in config["package-dir"].items()}
    found = {
        ".".join([name, *init.parent.relative_to(root).parts])
        for name, root in roots.items()
        for init in root.rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found <= listed
    for name in listed:
        root, *rest = name.split(".")
        assert roots[root].joinpath(*rest).is_dir(), name


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it (``build``'s default), so a file the sdist
    leaves out is missing from the wheel too."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv with the wheel installed as a user building images would
    (the docker extra: ``gem_sandbox.sandbox.backends.docker.images`` needs the SDK)."""
    root = tmp_path_factory.mktemp("venv")
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    wheel = next(dist.glob("gem_sandbox-*.whl"))
    subprocess.run([python, "-m", "pip", "install", "-q", f"{wheel}[docker]"], check=True)
    return python


@pytest.mark.slow
def test_the_wheel_and_the_sdist_carry_the_image_build_inputs_types_and_license(dist: Path) -> None:
    with zipfile.ZipFile(next(dist.glob("gem_sandbox-*.whl"))) as wheel:
        assert {f"gem_sandbox_images/{name}" for name in IMAGE_INPUTS} <= set(wheel.namelist())
        assert "gem_sandbox/py.typed" in wheel.namelist()
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        assert "License-Expression: Apache-2.0" in wheel.read(metadata).decode()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel.namelist())
    with tarfile.open(next(dist.glob("gem_sandbox-*.tar.gz"))) as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert {f"images/{name}" for name in IMAGE_INPUTS} <= names


@pytest.mark.slow
def test_the_installed_wheel_builds_the_image_of_the_source_tree(installed: Path, tmp_path: Path) -> None:
    """Same tag, so the same inputs: ``images build`` from the wheel makes the identical image."""
    from gem_sandbox.sandbox.backends.docker import images

    script = (
        "from gem_sandbox.sandbox.backends.docker import images;"
        "assert 'site-packages' in str(images.context_dir()), images.context_dir();"
        "print(images.current_tag())"
    )
    out = subprocess.run([installed, "-c", script], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == images.current_tag()


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_makes_a_catalogue_env(installed: Path, tmp_path: Path) -> None:
    script = (
        "import gem_sandbox as gem, gem_sandbox_envs, sys;"
        "assert 'site-packages' in gem_sandbox_envs.__file__, gem_sandbox_envs.__file__;"
        "env = gem.make('game:Wordle-v0-easy'); obs, _ = env.reset(seed=1); print(type(env).__name__);"
        "env = gem.make('qa:FictionalWorld-v0'); env.reset(seed=1); print(env.search_index.is_file());"
        "from gem_sandbox_envs.terminal import shipped_names; print(len(shipped_names()))"
    )
    out = subprocess.run([installed, "-c", script], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["WordleEnv", "True", "10"]
