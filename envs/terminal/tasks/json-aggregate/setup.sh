#!/bin/bash
set -e
cat > sample.jsonl <<'JSONL'
{"user": "ada", "event": "login", "ms": 120}
{"user": "bob", "event": "search", "ms": 340}
{"user": "ada", "event": "search", "ms": 80}
not json
{"user": "ada", "event": "logout", "ms": 95}
JSONL
