#!/bin/bash
set -e
cd /app
for path in inbox/*; do
  name=$(basename "$path")
  case "$name" in
    *.*) ext=$(printf '%s' "${name##*.}" | tr 'A-Z' 'a-z') ;;
    *) ext=none ;;
  esac
  mkdir -p "sorted/$ext"
  mv "$path" "sorted/$ext/$name"
done
