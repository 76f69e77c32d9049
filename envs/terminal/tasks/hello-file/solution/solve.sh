#!/bin/bash
set -e
cd /app
printf 'Hello, sandbox!\n' > greeting.txt
cat > greet.sh <<'SCRIPT'
#!/bin/bash
cat "$(dirname "$0")/greeting.txt"
SCRIPT
chmod +x greet.sh
