#!/usr/bin/env bash
# GPU check: builds pipebal against a CUDA-enabled LibTorch, runs the *_CUDA tests (profiler,
# engine, and pipelines across processes with their stages on the GPU), profiles one zoo model with every timer backend on the GPU, printing a short
# table, then balances it for 2 stages and trains that balance on the GPU, printing the
# predicted beside the measured step time, and trains it again as 2 processes over Gloo.
#
# Needs an NVIDIA GPU, the CUDA toolkit (nvcc; CUPTI from extras/CUPTI or $CUPTI_ROOT), CMake,
# a C++17 compiler, and pipebal's other dependencies (fmt, nlohmann/json, CLI11, GoogleTest;
# extra prefixes in $DEPS_PREFIX, ';'-separated; a folder .gpu-deps/usr in the checkout, e.g.
# Debian's packages unpacked with `dpkg -x`, is used when present). LibTorch comes from $TORCH_DIR (a LibTorch
# folder or any CMake prefix holding TorchConfig.cmake) or else from the pip wheel of `python3`.
# It cannot run on the development machines (no GPU there); run it on a GPU machine:
#
#   tools/gpu-check.sh [MODEL_SPEC] [INPUT_SHAPE]     # default: resnet:depth=18 32,3,64,64
#
# Environment: BUILD_DIR (default build-gpu), JOBS (default nproc), OUT_DIR (default
# $BUILD_DIR/gpu-check) for the profiles and the log, CMAKE_EXTRA_ARGS. FULL_SUITE=1 then also
# builds every target and runs the whole suite against this LibTorch (ctest, failures' output
# in $OUT_DIR/ctest.log), within FULL_SUITE_S seconds (default 600); FULL_SUITE=only does that
# alone, after the configure step. A pip wheel's LibTorch
# ships its own (newer) fmt headers, which shadow the system's: when the link then misses
# fmt::vNN symbols, add CMAKE_EXTRA_ARGS=-DCMAKE_CXX_FLAGS=-DFMT_HEADER_ONLY.
# A pip wheel's LibTorch (2.11) ships no Gloo headers: give them in $DEPS_PREFIX/include or
# CMAKE_EXTRA_ARGS=-DPIPEBAL_GLOO_INCLUDE_DIR=... (Gloo's own headers, with a gloo/config.h).
# NCCL links are built when nccl.h is found (the nvidia-nccl wheel's, through python3).
# Last run: NVIDIA H200, LibTorch 2.11.0+cu130, CUDA 13.0, 2026-12-04 (reports/gpu-check.md).
set -euo pipefail

model=${1:-resnet:depth=18}
shape=${2:-32,3,64,64}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
jobs=${JOBS:-$(nproc)}
out=${OUT_DIR:-$build/gpu-check}
mkdir -p "$out"

if [[ -n "${TORCH_DIR:-}" ]]; then
  torch_prefix=$TORCH_DIR
else
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
fi
deps=${DEPS_PREFIX:-}
[[ -z "$deps" && -d "$root/.gpu-deps/usr" ]] && deps=$root/.gpu-deps/usr
prefix="$torch_prefix${deps:+;$deps}"
echo "== LibTorch from $torch_prefix"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo "== configure ($build)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DPIPEBAL_BUILD_BENCH=OFF -DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}" \
  ${CMAKE_EXTRA_ARGS:-} 2>&1 | tee "$out/configure.log" |
  grep -E "pipebal:|CUPTI|Error" || true
grep -q "CUDA code paths: ON" "$out/configure.log" ||
  { echo "gpu-check: this LibTorch has no CUDA; nothing to check" >&2; exit 1; }

status=0
if [[ "${FULL_SUITE:-0}" != only ]]; then  # the regular checks, up to "fi  # FULL_SUITE=only"
echo "== build"
cmake --build "$build" -j "$jobs" --target pipebal profiler_tests pipeline_tests \
  distributed_tests transparency_rank 2>&1 | tee "$out/build.log" | tail -n 20

echo "== *_CUDA tests"
for suite in profiler_tests pipeline_tests distributed_tests; do
  "$build/tests/$suite" --gtest_filter='*_CUDA*' 2>&1 | tee "$out/$suite-cuda.log" | tail -n 8 ||
    status=1
done

echo "== profile $model [$shape] on cuda with every backend"
for backend in wallclock events cupti; do
  if ! "$build/tools/pipebal" profile --model "$model" --input-shape "$shape" --device cuda \
      --backend "$backend" -o "$out/profile-$backend.json" >"$out/profile-$backend.txt" 2>&1; then
    echo "$backend: failed: $(tail -n 1 "$out/profile-$backend.txt")"
  fi
done

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
print(f"{'backend':<10} {'layers':>6} {'fwd ms':>10} {'bwd ms':>10} {'act MiB':>9} {'gpu'}")
for backend in ("wallclock", "events", "cupti"):
    path = os.path.join(out, f"profile-{backend}.json")
    if not os.path.exists(path):
        print(f"{backend:<10} {'-':>6} (no profile)")
        continue
    doc = json.load(open(path))
    t = doc["totals"]
    print(f"{doc['backend']:<10} {len(doc['layers']):>6} {t['forward_ms']:>10.3f} "
          f"{t['backward_ms']:>10.3f} {t['activation_bytes'] / 2**20:>9.1f} "
          f"{doc['environment']['gpu_name']}")
PY

echo "== balance for 2 stages and train it on the GPU (predicted vs measured)"
chunks=4
if "$build/tools/pipebal" profile --model "$model" --input-shape "$shape" --device cuda \
    --chunks "$chunks" -o "$out/profile-micro.json" >"$out/profile-micro.txt" 2>&1 &&
  "$build/tools/pipebal" balance "$out/profile-micro.json" --stages 2 --chunks "$chunks" \
    -o "$out/plan.json" >"$out/balance.txt" 2>&1 &&
  "$build/tools/pipebal" train --model "$model" --input-shape "$shape" --plan "$out/plan.json" \
    --devices cuda:0,cuda:0 --chunks "$chunks" --steps 10 -o "$out/run.json" \
    >"$out/train.txt" 2>&1; then
  python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
plan = json.load(open(os.path.join(out, "plan.json")))
run = json.load(open(os.path.join(out, "run.json")))
predicted, measured = plan["prediction"]["step_ms"], run["median_step_ms"]
print(f"balance {plan['balance']}, {plan['prediction']['chunks']} chunks: predicted step "
      f"{predicted:.2f} ms, measured {measured:.2f} ms ({(predicted - measured) / measured:+.0%})")
PY
else
  echo "balance/train on cuda failed:"; tail -n 3 "$out"/{profile-micro,balance,train}.txt
  status=1
fi

# Across processes: NCCL refuses two ranks on one GPU, so the two stages' processes share
# cuda:0 and their messages leave the GPU (shared memory). In float32 on a GPU the losses need
# not be bit for bit the one-process run's (cuDNN may pick other algorithms in another process,
# and TF32 rounds them differently): within 1% at every step, the largest difference printed.
# The float64 transparency of processes on the GPU is AcrossProcessesOnCuda above.
echo "== the same plan as 2 processes on cuda:0"
if [[ -f "$out/plan.json" ]] &&
  "$build/tools/pipebal" launch --nproc-per-node 2 --master-port 0 -- "$build/tools/pipebal" \
    train --plan "$out/plan.json" --devices cuda:0 --chunks "$chunks" --steps 10 \
    -o "$out/run-processes.json" >"$out/train-processes.txt" 2>&1; then
  python3 - "$out" <<'PY' || status=1
import json, os, sys
out = sys.argv[1]
one = json.load(open(os.path.join(out, "run.json")))
two = json.load(open(os.path.join(out, "run-processes.json")))
apart = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(one["steps"], two["steps"]))
print(f"2 processes: median step {two['median_step_ms']:.2f} ms (1 process: "
      f"{one['median_step_ms']:.2f} ms), losses at most {apart:.2%} apart")
sys.exit(0 if apart <= 0.01 and len(one["steps"]) == len(two["steps"]) else 1)
PY
else
  echo "2 processes on cuda failed:"; tail -n 3 "$out/train-processes.txt"
  status=1
fi
fi  # FULL_SUITE=only skips to here
if [[ "${FULL_SUITE:-0}" != 0 ]]; then
  echo "== the whole suite against this LibTorch"
  cmake --build "$build" -j "$jobs" 2>&1 | tee -a "$out/build.log" | grep -E "error:" | head -n 20
  (cd "$build" && timeout "${FULL_SUITE_S:-600}" ctest -j "$jobs" --timeout 300 \
    --output-on-failure >"$out/ctest.log" 2>&1) || status=1
  grep -E "tests passed|\(Failed\)|\(Timeout\)|Not Run" "$out/ctest.log" | head -n 30
fi
exit $status
