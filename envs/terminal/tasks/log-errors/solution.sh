#!/bin/bash
set -e
cd /app
{
  echo "code,count"
  awk '$2 == "ERROR" {print $3}' logs/*.log | sort | uniq -c | sort -k1,1nr -k2,2 | awk '{print $2 "," $1}'
} > errors.csv
