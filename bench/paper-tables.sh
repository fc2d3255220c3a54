#!/usr/bin/env bash
# torchgpipe's speed benchmark at CPU scale: U-Net and AmoebaNet-D in 2 pipeline stages with
# m = 1, 4 and 32 micro-batches, throughput relative to m = 1, measured (pipebal train) beside
# predicted (pipebal balance on a profile at that micro-batch size, with one co-runner).
# Prints JSON lines and a markdown table. Needs python3 for the JSON. Takes several minutes.
# Usage: bench/paper-tables.sh [BUILD_DIR] > reports/paper-tables.md
set -euo pipefail
pipebal=${1:-build}/tools/pipebal
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

models=("unet:B=3,C=8|64,3,64,64" "amoebanetd:L=2,D=16|64,3,64,64")
echo "| model | input | m | balance | predicted ms | measured ms | predicted speed-up over m=1 | measured speed-up over m=1 |"
echo "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"
for entry in "${models[@]}"; do
  spec=${entry%%|*}
  shape=${entry##*|}
  for m in 1 4 32; do
    co=1
    [ "$m" -gt 1 ] || co=0  # one micro-batch: the stages take turns
    "$pipebal" profile --model "$spec" --input-shape "$shape" --chunks "$m" --threads 1 \
      --co-runners "$co" --repeat 5 -o "$work/profile-$m.json" >/dev/null
    "$pipebal" balance "$work/profile-$m.json" --stages 2 --chunks "$m" -o "$work/plan-$m.json" >/dev/null
    "$pipebal" train --model "$spec" --input-shape "$shape" --plan "$work/plan-$m.json" \
      --steps 4 --warmup-steps 1 -o "$work/run-$m.json" >/dev/null
  done
  python3 - "$work" "$spec" "$shape" <<'PY'
import json, sys
work, spec, shape = sys.argv[1:]
plans = {m: json.load(open(f"{work}/plan-{m}.json")) for m in (1, 4, 32)}
runs = {m: json.load(open(f"{work}/run-{m}.json")) for m in (1, 4, 32)}
for m in (1, 4, 32):
    p, r = plans[m]["prediction"]["step_ms"], runs[m]["median_step_ms"]
    p1, r1 = plans[1]["prediction"]["step_ms"], runs[1]["median_step_ms"]
    print(f"| `{spec}` | {shape} | {m} | {plans[m]['balance']} | {p:.1f} | {r:.1f} | {p1 / p:.2f} | {r1 / r:.2f} |")
PY
done
