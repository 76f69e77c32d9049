#!/bin/bash
set -e
cat > /app/fib.py <<'PY'
import sys


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


print(fib(int(sys.argv[1])))
PY
