"""The programs envs send into sandboxes as text (harnesses, runners), read from this package.

They are plain Python files beside the host code that sends them, so they are read, tested and
packaged like any module, and never imported on the host.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def source(package: str, name: str) -> str:
    """The text of sandbox program ``name`` in ``package``."""
    return files(package).joinpath(name).read_text(encoding="utf-8")


def isolation() -> str:
    """:mod:`gem_sandbox_envs.isolation`, which every trusted harness's first cell starts with."""
    return source(__package__ or "gem_sandbox_envs", "isolation.py")
