#!/usr/bin/env bash
# Runs every benchmark and writes its raw JSON into reports/ (the .md summaries beside them are
# written by hand from these files). Usage: bench/run-all.sh [BUILD_DIR]. Takes a few minutes;
# run it on an otherwise idle machine.
set -euo pipefail
build=${1:-build}
out=reports
"$build/bench/balance_bench" --benchmark_filter=DpPartition --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_out="$out/balance-bench-timing.json" \
  --benchmark_out_format=json
"$build/bench/balance_bench" --benchmark_filter=Quality --benchmark_out="$out/balance-bench-quality.json" \
  --benchmark_out_format=json
"$build/bench/profiler_bench" > "$out/profiler-bench.json"
"$build/bench/engine_bench" --repeats 15 > "$out/engine-bench-mlp.json"
"$build/bench/engine_bench" --model gpt:layers=6,dim=128,heads=4,seq=64 --input-shape 32,64 \
  --repeats 15 > "$out/engine-bench-gpt.json"
echo "wrote $out/*.json; update the .md summaries from them"
