#!/usr/bin/env bash
# Builds the fuzz targets (clang, libFuzzer, ASan + UBSan) and runs each one, seeded with the
# documents the tests and examples use.
#
#   fuzz/run.sh                 # each target for 60 s of random inputs   (make fuzz)
#   fuzz/run.sh --seconds 300   # longer
#   fuzz/run.sh --runs 20000    # a fixed number of inputs from a fixed seed: deterministic,
#                               # what the test suite runs
#
# Crashes are written to build-fuzz/crashes/TARGET/ and fail the script. Environment: BUILD_FUZZ
# (default build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
runs=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N | --runs N]" >&2; exit 2 ;;
  esac
done
build=${BUILD_FUZZ:-build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (tools/install-deps.sh installs it)" >&2; exit 2; }

CXX=clang++ cmake -S fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 >/dev/null

# Seeds: the documents the tests and the examples read, and sizes as users type them.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{profile_reader,plan_reader,report_data,units,zip_directory}
cp reports/examples/demo/profile.json "$seeds/profile_reader/demo_profile.json"
cp tests/reports/fixtures/validation_dir/profile.json "$seeds/profile_reader/fixture_profile.json"
# One measured under a CPU quota: environment.machine_load with its quota and how often it held.
python3 -c 'import json, sys
doc = json.load(open(sys.argv[1]))
doc["environment"]["machine_load"].update(quota_cores=1.5, throttled=0.25)
json.dump(doc, open(sys.argv[2], "w"), indent=2)' reports/examples/demo/profile.json \
  "$seeds/profile_reader/quota_profile.json"
cp reports/examples/demo/plan.json "$seeds/plan_reader/demo_plan.json"
cp tests/reports/fixtures/validation_dir/plan.json "$seeds/plan_reader/fixture_plan.json"
cp tests/reports/fixtures/validation_dir/validation.json "$seeds/report_data/validation.json"
cp tests/reports/fixtures/validation_dir/run.json "$seeds/report_data/run.json"
cp tests/reports/fixtures/comparisons/*.json "$seeds/report_data/"
# TorchScript models as torch.jit.save writes them (zip archives), and a record written as zip64.
cp tests/fixtures/chain_named_scripted.pt tests/fixtures/chain_two_inputs_scripted.pt \
  "$seeds/zip_directory/"
python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as archive:
    with archive.open("archive/data/0", "w", force_zip64=True) as record:
        record.write(bytes(100))
    archive.writestr("archive/data.pkl", b"pickle")' "$seeds/zip_directory/zip64.zip"
i=0
for size in 8G 512MiB 1.5GB 10GB/s 1e9 100MB 0 -1 1e400 7TiB 1K; do
  printf '%s' "$size" > "$seeds/units/seed$((i++))"
done

status=0
for target in profile_reader plan_reader report_data units zip_directory; do
  corpus=$build/corpus/$target
  crashes=$build/crashes/$target
  mkdir -p "$corpus" "$crashes"
  if [[ $runs -gt 0 ]]; then
    limit=(-runs="$runs" -seed=1)
  else
    limit=(-max_total_time="$seconds")
  fi
  echo "fuzz: $target (${limit[*]})"
  if ! "$build/fuzz_$target" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$crashes/" -print_final_stats=1 "$corpus" "$seeds/$target" \
      >"$build/$target.log" 2>&1; then
    echo "fuzz: $target FAILED; see $build/$target.log and $crashes/" >&2
    tail -n 30 "$build/$target.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$target.log" | sed 's/^/  /'
  fi
done
exit $status
