#!/usr/bin/env bash
# A short end-to-end run of every command, for builds that are too slow for the whole demo
# (the sanitizer build, `make sanitize`): profile, balance, train and validate a small model
# and render the report. Exits non-zero at the first command that fails.
#
#   tools/cli-smoke.sh [PIPEBAL]     # default build/tools/pipebal
set -euo pipefail
pipebal=${1:-build/tools/pipebal}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model="--model mlp:layers=4,width=32 --input-shape 16,32"
set -x
"$pipebal" models >/dev/null
"$pipebal" profile $model --chunks 4 --repeat 2 --warmup 1 -q -o "$dir/profile.json" >/dev/null
"$pipebal" balance "$dir/profile.json" --stages 2 --compare -o "$dir/plan.json" >/dev/null
"$pipebal" train --plan "$dir/plan.json" --steps 2 --warmup-steps 1 -q -o "$dir/run.json" \
  --trace "$dir/trace.json" >/dev/null
"$pipebal" validate $model --stages 2 --chunks 4 --steps 1 --warmup-steps 1 -o "$dir/v" >/dev/null
"$pipebal" report "$dir/v" >/dev/null
if "$pipebal" balance "$dir/profile.json" --stages 99 2>/dev/null; then exit 1; fi
set +x
echo "cli-smoke: every command ran"
