#!/bin/bash
set -e
mkdir -p inbox
for name in report.pdf notes.txt photo.JPG data.csv backup.tar.gz README todo.txt image.png Makefile run.SH; do
  printf 'contents of %s\n' "$name" > "inbox/$name"
done
