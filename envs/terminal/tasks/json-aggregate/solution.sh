#!/bin/bash
set -e
cat > /app/aggregate.py <<'PY'
import json
import sys

users, invalid = {}, 0
for line in sys.stdin:
    if not line.strip():
        continue
    try:
        event = json.loads(line)
        user, name, ms = event["user"], event["event"], event["ms"]
        if not (isinstance(user, str) and isinstance(name, str) and type(ms) is int):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        invalid += 1
        continue
    users.setdefault(user, {"first": name, "times": []})["times"].append(ms)

out = {}
for user, seen in users.items():
    times = sorted(seen["times"])
    out[user] = {"events": len(times), "p50_ms": times[(len(times) - 1) // 2], "first": seen["first"]}
out["_invalid"] = invalid
print(json.dumps(out))
PY
