#!/bin/bash
set -e
cat > /app/backup.sh <<'SH'
#!/bin/bash
if [ "$#" -ne 2 ] || [ ! -d "$1" ]; then
  echo "usage: backup.sh SRC DEST (SRC must be a directory)" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
mkdir -p "$2"
archive="$(cd "$2" && pwd)/backup-$(basename "$src").tar.gz"
(cd "$src" && find . -mindepth 1 ! -name '*.tmp' ! -type d -printf '%P\n' | tar -czf "$archive" -T -)
echo "$archive"
SH
chmod +x /app/backup.sh
