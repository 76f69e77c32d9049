#!/bin/bash
set -e
mkdir -p logs
cat > logs/api.log <<'LOG'
2024-05-01T10:00:00 INFO started
2024-05-01T10:00:01 ERROR E1042 disk quota exceeded
2024-05-01T10:00:02 WARN E1042 disk nearly full
2024-05-01T10:00:03 ERROR E2001 upstream timeout
2024-05-01T10:00:04 ERROR E1042 disk quota exceeded
2024-05-01T10:00:05 ERROR E0007 bad request
LOG
cat > logs/worker.log <<'LOG'
2024-05-01T11:00:00 INFO started
2024-05-01T11:00:01 ERROR E2001 upstream timeout
2024-05-01T11:00:02 ERROR E2001 upstream timeout
2024-05-01T11:00:03 INFO retry E0007
2024-05-01T11:00:04 ERROR E0500 out of memory
2024-05-01T11:00:05 ERROR E0007 bad request
LOG
