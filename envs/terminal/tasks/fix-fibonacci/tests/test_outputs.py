import subprocess

import pytest

KNOWN = {0: 0, 1: 1, 2: 1, 10: 55, 90: 2880067194370816120}


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def run(n):
    result = subprocess.run(["python3", "/app/fib.py", str(n)], capture_output=True, text=True, timeout=2)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip())


@pytest.mark.parametrize("n", sorted(KNOWN))
def test_known_values(n):
    assert run(n) == KNOWN[n]


def test_large_n_is_fast_and_exact():
    assert run(500) == fib(500)
