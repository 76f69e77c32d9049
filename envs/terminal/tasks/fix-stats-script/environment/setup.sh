#!/bin/bash
set -e
printf '%s\n' 10 9 100 -3 7 '' 22 > numbers.txt
cat > stats.sh <<'SH'
#!/bin/bash
sorted=$(grep -v '^$' "$1" | sort)
count=$(echo "$sorted" | wc -l)
min=$(echo "$sorted" | head -n 1)
max=$(echo "$sorted" | tail -n 1)
sum=0
for n in $sorted; do sum=$((sum + n)); done
mean=$((sum / count))
median=$(echo "$sorted" | sed -n "$((count / 2))p")
echo "$min $max $mean $median"
SH
chmod +x stats.sh
