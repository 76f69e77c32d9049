#!/bin/bash
set -e
cat > /app/stats.sh <<'SH'
#!/bin/bash
grep -v '^[[:space:]]*$' "$1" | sort -n | awk '
  { v[NR] = $1; sum += $1 }
  END {
    if (NR == 0) { print "no data" > "/dev/stderr"; exit 1 }
    median = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%d %d %.2f %.2f\n", v[1], v[NR], sum / NR, median
  }'
SH
chmod +x /app/stats.sh
