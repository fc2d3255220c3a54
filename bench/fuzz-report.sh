#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 120) and writes reports/fuzzing.md with the raw
# libFuzzer statistics beside it (reports/fuzzing-raw.txt). Run from a clean tree, with nothing
# else running.
#
#   bench/fuzz-report.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
build=${BUILD_FUZZ:-build-fuzz}
commit=$(git describe --always --dirty)
status=0
bash fuzz/run.sh --seconds "$seconds" || status=$?

raw=reports/fuzzing-raw.txt
{
  echo "# fuzz/run.sh --seconds $seconds at $commit on $(date -u +%Y-%m-%d), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  for target in profile_reader plan_reader report_data units zip_directory; do
    echo "## $target"
    grep -E '^(stat::|==[0-9]+==ERROR|SUMMARY)' "$build/$target.log" || true
    echo "crash files: $(ls "$build/crashes/$target" | wc -l)"
  done
} > "$raw"

{
  echo "# Fuzzing"
  echo
  echo "libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer (\`fuzz/\`, clang 14) on the"
  echo "readers of what users and other tools hand to pipebal. Produced by \`bench/fuzz-report.sh $seconds\`"
  echo "at $commit; the raw statistics are in [fuzzing-raw.txt](fuzzing-raw.txt)."
  echo
  echo "| target | reads | inputs run | crashes |"
  echo "| --- | --- | ---: | ---: |"
  describe() {
    case $1 in
      profile_reader) echo "profile.json, then every partitioner on it (\`balance\`)" ;;
      plan_reader) echo "plan.json (\`train --plan\`)" ;;
      report_data) echo "validation.json, run.json and the comparisons of validate --auto and --plans rendered to HTML (\`report\`)" ;;
      units) echo "sizes and bandwidths (\`--memory-cap\`, \`--bandwidth\`)" ;;
      zip_directory) echo "a zip archive's directory (TorchScript models, torch.save files: the damaged-file check)" ;;
    esac
  }
  for target in profile_reader plan_reader report_data units zip_directory; do
    runs=$(grep -m1 'stat::number_of_executed_units' "$build/$target.log" | awk '{print $2}')
    crashes=$(ls "$build/crashes/$target" | wc -l)
    echo "| \`fuzz_$target\` | $(describe $target) | ${runs:-?} | $crashes |"
  done
  echo
  echo "The test suite runs each target on 20,000 inputs from a fixed seed (\`make test\`); \`make fuzz\`"
  echo "runs them for a time. Crashes found by fuzzing and fixed are listed below."
  echo
  echo "## Crashes found and fixed"
  echo
  echo "None so far: the hardening of the readers (bounded sizes and counts, integers checked before"
  echo "conversion, saturating byte arithmetic, regular files only) came before the fuzzers; the"
  echo "defects it fixed are the rows of the bad-input table (\`tests/tools/bad_input_test.cpp\`)."
} > reports/fuzzing.md
exit $status
