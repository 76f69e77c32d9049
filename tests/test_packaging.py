"""The wheel carries the whole library and the env catalogue."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_makes_a_catalogue_env(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("gem_sandbox-*.whl"))
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", str(wheel)], check=True)
    script = (
        "import gem_sandbox as gem, gem_sandbox_envs, sys;"
        "assert 'site-packages' in gem_sandbox_envs.__file__, gem_sandbox_envs.__file__;"
        "env = gem.make('game:Wordle-v0-easy'); obs, _ = env.reset(seed=1); print(type(env).__name__)"
    )
    out = subprocess.run([python, "-c", script], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "WordleEnv"
