#!/bin/bash
set -e
mkdir -p project/src project/cache
echo 'print("hi")' > project/src/main.py
echo 'notes' > project/README
echo 'scratch' > project/cache/build.tmp
echo 'keep' > project/cache/index
