#!/usr/bin/env bash
# Regenerates every report in reports/ from a fresh measurement: each script below runs its
# benchmark, writes the raw data into reports/ and the markdown summary made from it. Run it on
# an otherwise idle machine from a clean, committed tree built with benchmarks
# (cmake -DPIPEBAL_BUILD_BENCH=ON), then commit reports/. About an hour on 2 cores.
# Usage: bench/run-all.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for script in balance-bench profiler-bench engine-bench zoo-balance-quality validation-accuracy \
  paper-tables layer-sum processes-vs-threads planner-grid script-dropout schedules core-pairing \
  core-speeds stage-memory split-cost stack-alignment cli-startup busy-machine bind-cores \
  grid-company; do
  echo "== bench/$script.py" >&2
  python3 "bench/$script.py" --build "$build"
done
bash bench/fuzz-report.sh 60
