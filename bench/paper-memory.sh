#!/usr/bin/env bash
# torchgpipe's memory benchmark at CPU scale: U-Net(B=3, C) on 32 images of 3x64x64 in 2 stages
# with 8 micro-batches, checkpoint never vs always, for growing C. For each run: the largest
# per-stage memory the balancer predicts (plan.json) and the largest per-stage peak the engine
# measures (run.json). Prints a markdown table; the largest C under a cap is read off it.
# Needs python3 for the JSON. Usage: bench/paper-memory.sh [BUILD_DIR] > table.md
set -euo pipefail
pipebal=${1:-build}/tools/pipebal
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "| C | checkpoint | balance | predicted peak (MiB) | measured peak (MiB) | step ms |"
echo "| ---: | --- | --- | ---: | ---: | ---: |"
for c in 8 16 32 48; do
  spec="unet:B=3,C=$c"
  "$pipebal" profile --model "$spec" --input-shape 32,3,64,64 --chunks 8 --threads 1 --repeat 3 \
    -o "$work/profile.json" >/dev/null
  for checkpoint in never always; do
    "$pipebal" balance "$work/profile.json" --stages 2 --chunks 8 --checkpoint "$checkpoint" \
      -o "$work/plan.json" >/dev/null
    "$pipebal" train --model "$spec" --input-shape 32,3,64,64 --plan "$work/plan.json" \
      --steps 2 --warmup-steps 1 -o "$work/run.json" >/dev/null
    python3 - "$work" "$c" "$checkpoint" <<'PY'
import json, sys
work, c, checkpoint = sys.argv[1:]
plan = json.load(open(f"{work}/plan.json"))
run = json.load(open(f"{work}/run.json"))
predicted = max(s["memory_bytes"] for s in plan["stages"]) / 2**20
measured = max(s["peak_memory_bytes"] for s in run["stages"]) / 2**20
print(f"| {c} | {checkpoint} | {plan['balance']} | {predicted:.1f} | {measured:.1f} | {run['median_step_ms']:.0f} |")
PY
  done
done
