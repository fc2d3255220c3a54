#!/usr/bin/env bash
# Quality of the baseline partitioners on real profiles: profiles each zoo model (small CPU
# sizes), balances it into 2, 4 and 8 stages with every algorithm (`pipebal balance --compare`)
# and prints a markdown table of each algorithm's bottleneck over dp's (the optimum).
# Usage: bench/zoo-balance-quality.sh [BUILD_DIR] > table.md
set -euo pipefail
pipebal=${1:-build}/tools/pipebal
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

models=(
  "mlp:layers=16,width=256|64,256"
  "resnet:depth=50,width=16|32,3,64,64"
  "unet:B=3,C=8|16,3,64,64"
  "amoebanetd:L=3,D=16|16,3,64,64"
  "gpt:layers=12,dim=128,heads=4,seq=64|32,64"
)
echo "| model | layers | stages | blockpartition | uniform | parameters |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for entry in "${models[@]}"; do
  spec=${entry%%|*}
  shape=${entry##*|}
  "$pipebal" profile --model "$spec" --input-shape "$shape" --chunks 4 --threads 1 \
    --repeat 5 -o "$work/profile.json" >/dev/null
  layers=$(grep -c '"index"' "$work/profile.json")
  for stages in 2 4 8; do
    [ "$stages" -le "$layers" ] || continue
    # The --compare table: "algorithm  bottleneck ms  vs-dp ..."; keep the vs-dp column.
    ratios=$("$pipebal" balance "$work/profile.json" --stages "$stages" --chunks 4 --compare |
      awk '$1=="blockpartition"||$1=="uniform"||$1=="parameters" {r[$1]=$4}
           END {printf "%s | %s | %s", r["blockpartition"], r["uniform"], r["parameters"]}')
    echo "| \`$spec\` | $layers | $stages | $ratios |"
  done
done
