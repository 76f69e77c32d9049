import os
import subprocess
import tempfile

import pytest

BINARY = os.path.join(tempfile.mkdtemp(), "linecount")


@pytest.fixture(scope="module")
def linecount():
    # Built here, from the source: a binary the model left in /app proves nothing.
    build = subprocess.run(["g++", "-O2", "-o", BINARY, "/app/linecount.cpp"], capture_output=True, text=True, timeout=60)
    assert build.returncode == 0, build.stderr
    return BINARY


@pytest.mark.parametrize(
    "text, lines",
    [("", 0), ("one\n", 1), ("one", 1), ("a\nb\nc\n", 3), ("a\nb\nc", 3), ("\n\n", 2), ("x" * 100000, 1)],
)
def test_counts_lines(linecount, text, lines):
    result = subprocess.run([linecount], input=text, capture_output=True, text=True, timeout=10)
    assert result.returncode == 0
    assert result.stdout.strip() == str(lines)
