#!/bin/bash
set -e
cd /app
python3 - <<'PY'
import csv, json
from collections import Counter, defaultdict

revenue, units = defaultdict(float), Counter()
with open("sales.csv") as f:
    for row in csv.DictReader(f):
        try:
            n, price = int(row["units"]), float(row["unit_price"])
        except (TypeError, ValueError):
            continue
        revenue[row["region"]] += n * price
        units[row["product"]] += n
report = {"revenue": {r: round(v, 2) for r, v in revenue.items()}, "top_product": units.most_common(1)[0][0]}
with open("report.json", "w") as f:
    json.dump(report, f)
PY
