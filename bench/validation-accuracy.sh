#!/usr/bin/env bash
# Prediction accuracy on the zoo models: `pipebal validate --stages 2` on each, RUNS times
# (default 3, in turns, so that a slow spell of a shared machine does not fall on one model
# only), each validation.json kept in OUT_DIR (default reports/validation-accuracy/) as
# NAME-RUN.json. Prints one markdown table row per run and candidate balance — predicted
# beside measured step time and speed-up over the same balance run as one micro-batch — and
# a summary per model. About one minute per run on 2 cores.
# Usage: bench/validation-accuracy.sh [BUILD_DIR] > table.md
set -euo pipefail
pipebal=${1:-build}/tools/pipebal
out=${OUT_DIR:-reports/validation-accuracy}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# name | model | input shape | chunks
runs=(
  "gpt|gpt:layers=6,dim=128,heads=4,seq=64,vocab=1000,dropout=0|64,64|4"
  "resnet|resnet:depth=50,width=16,classes=10|32,3,64,64|8"
  "unet|unet:B=3,C=8|32,3,64,64|8"
  "amoebanetd|amoebanetd:L=2,D=16,classes=10|32,3,64,64|8"
)
repeats=${RUNS:-3}
for run in $(seq 1 "$repeats"); do
  for entry in "${runs[@]}"; do
    IFS='|' read -r name spec shape chunks <<<"$entry"
    echo "run $run: validating $spec ..." >&2
    "$pipebal" validate --model "$spec" --input-shape "$shape" --stages 2 --chunks "$chunks" \
      --steps 7 -o "$work/$name" >/dev/null
    cp "$work/$name/validation.json" "$out/$name-$run.json"
  done
done

python3 - "$out" "$repeats" "${runs[@]}" <<'PY'
import json, statistics, sys
out, repeats, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| model | run | candidate | balance | predicted ms | measured ms | step error "
      "| predicted × | measured × | speed-up error |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
summary = []
for entry in runs:
    name = entry.split("|")[0]
    steps, speedups = [], []
    for run in range(1, repeats + 1):
        v = json.load(open(f"{out}/{name}-{run}.json"))
        for c in v["candidates"]:
            p, m = c["predicted"], c["measured"]
            steps.append(abs(c["step_error"]))
            speedups.append(abs(c["speedup_error"]))
            print(f"| `{name}` | {run} | {', '.join(c['algorithms'])} | {c['balance']} "
                  f"| {p['step_ms']:.1f} | {m['step_ms']:.1f} | {c['step_error']:+.1%} "
                  f"| {p['speedup']:.2f} | {m['speedup']:.2f} | {c['speedup_error']:+.1%} |")
    summary.append((f"`{v['model']}` {v['input_shape']}, {v['chunks']} chunks", steps, speedups))
print()
print("| model | rows | median \\|step error\\| | within 15% | median \\|speed-up error\\| | within 10% |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for model, steps, speedups in summary:
    print(f"| {model} | {len(steps)} | {statistics.median(steps):.1%} "
          f"| {sum(e <= 0.15 for e in steps)}/{len(steps)} | {statistics.median(speedups):.1%} "
          f"| {sum(e <= 0.10 for e in speedups)}/{len(speedups)} |")
PY
