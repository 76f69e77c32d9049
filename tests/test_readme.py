"""Every Python block of the README runs as written, each in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.M | re.S)


def _title(block: str) -> str:
    first = next(line for line in block.splitlines() if line.strip() and not line.startswith(("import", "from")))
    return first.strip()[:40]


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 6


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[_title(b) for b in BLOCKS])
def test_a_readme_block_runs_as_written(block: str, tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Unclosed" not in done.stderr, done.stderr
