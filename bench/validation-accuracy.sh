#!/usr/bin/env bash
# Prediction accuracy on the zoo models: `pipebal validate --stages 2` on each, its
# validation.json kept in OUT_DIR (default reports/validation-accuracy/), and one markdown
# table row per candidate balance: predicted beside measured step time and speed-up over the
# same balance run as one micro-batch. Takes about two minutes on 2 cores.
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
for entry in "${runs[@]}"; do
  IFS='|' read -r name spec shape chunks <<<"$entry"
  echo "validating $spec ..." >&2
  "$pipebal" validate --model "$spec" --input-shape "$shape" --stages 2 --chunks "$chunks" \
    --steps 7 -o "$work/$name" >/dev/null
  cp "$work/$name/validation.json" "$out/$name.json"
done

python3 - "$out" "${runs[@]}" <<'PY'
import json, sys
out, runs = sys.argv[1], sys.argv[2:]
print("| model | input | chunks | candidate | balance | predicted ms | measured ms | step error "
      "| predicted × | measured × | speed-up error |")
print("| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for entry in runs:
    name = entry.split("|")[0]
    v = json.load(open(f"{out}/{name}.json"))
    for c in v["candidates"]:
        p, m = c["predicted"], c["measured"]
        print(f"| `{v['model']}` | {v['input_shape']} | {v['chunks']} | {', '.join(c['algorithms'])} "
              f"| {c['balance']} | {p['step_ms']:.1f} | {m['step_ms']:.1f} | {c['step_error']:+.1%} "
              f"| {p['speedup']:.2f} | {m['speedup']:.2f} | {c['speedup_error']:+.1%} |")
PY
