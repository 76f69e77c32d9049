import os
import subprocess
import tempfile

import pytest


def stats(lines):
    path = os.path.join(tempfile.mkdtemp(), "numbers.txt")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return subprocess.run(["/app/stats.sh", path], capture_output=True, text=True, timeout=10)


@pytest.mark.parametrize(
    "lines, expected",
    [
        (["10", "9", "100", "-3", "7", "", "22"], "-3 100 24.17 9.50"),
        (["5"], "5 5 5.00 5.00"),
        (["3", "1", "2"], "1 3 2.00 2.00"),
        (["-10", "-20", "", "", "30", "40"], "-20 40 10.00 10.00"),
    ],
)
def test_statistics(lines, expected):
    result = stats(lines)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_no_numbers_is_an_error():
    result = stats(["", ""])
    assert result.returncode == 1
    assert "no data" in result.stderr
