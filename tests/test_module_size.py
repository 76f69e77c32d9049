"""No module of the library grows past 600 lines: one that does holds more than one
responsibility and is split (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

import gem_sandbox

MAX_LINES = 600


def test_no_module_of_the_library_is_over_600_lines() -> None:
    root = Path(gem_sandbox.__file__).parent
    sizes = {str(path.relative_to(root)): len(path.read_text().splitlines()) for path in root.rglob("*.py")}
    assert len(sizes) > 100, sizes  # the package itself, not a stray copy
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
