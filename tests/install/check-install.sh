#!/usr/bin/env bash
# The package a C++ user installs: `cmake --install` into a fresh prefix, then the examples
# built against that install (not the source tree) with CMake, the torch-free one also with
# pkg-config, and run.
#
#   tests/install/check-install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/pipebal/balance/plan.h"
# Every header reaches the others as "pipebal/...": -I PREFIX/include is the only include path a
# user needs, and none of ours can shadow a user's own common/ or models/.
if grep -rnE '#include "(common|pipeline|distributed|balance|models|reports|profiler|workflow)/' \
  "$prefix/include/pipebal"; then
  echo "check-install: installed headers include others without the pipebal/ prefix" >&2
  exit 1
fi
test -x "$prefix/bin/pipebal"
test -x "$prefix/bin/pipebal-torch"
# `pipebal` balances itself and hands model commands to pipebal-torch beside it.
"$prefix/bin/pipebal" balance "$source_dir/reports/examples/demo/profile.json" --stages 2 >/dev/null
"$prefix/bin/pipebal" models >/dev/null

torch_prefix=$(grep -m1 '^Torch_DIR:' "$build/CMakeCache.txt" | cut -d= -f2)
cmake -S "$source_dir/examples" -B "$scratch/examples" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$torch_prefix" >/dev/null
cmake --build "$scratch/examples" -j2 >/dev/null

# The library plans a profile as the command line does: the same balance and predicted step.
demo_profile=$source_dir/reports/examples/demo/profile.json
"$scratch/examples/balance_profile" "$demo_profile" 3 | tee "$scratch/example.txt"
"$prefix/bin/pipebal" balance "$demo_profile" --stages 3 --schedule 1f1b --format json \
  >"$scratch/cli.json"
python3 - "$scratch/example.txt" "$scratch/cli.json" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
cli = json.load(open(sys.argv[2]))
balance = [int(x) for x in lines[0].split()[1:]]
step = float(next(l for l in lines if l.startswith("predicted step")).split()[2])
assert balance == cli["balance"], (balance, cli["balance"])
assert abs(step - cli["prediction"]["step_ms"]) <= 1e-6 * cli["prediction"]["step_ms"], (
    step, cli["prediction"]["step_ms"])
PY
"$scratch/examples/train_pipeline" 2 6

# The torch-free components where LibTorch cannot be found: the package is found with them, and a
# component that needs LibTorch, asked for as optional, is not found rather than failing it.
mkdir -p "$scratch/torch_free"
cat >"$scratch/torch_free/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(torch_free CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(pipebal CONFIG REQUIRED COMPONENTS balance launch common
             OPTIONAL_COMPONENTS pipeline)
if(pipebal_pipeline_FOUND OR TARGET pipebal::pipeline)
  message(FATAL_ERROR "pipebal::pipeline found where LibTorch cannot be")
endif()
add_executable(balance_profile $source_dir/examples/balance_profile/main.cpp)
target_link_libraries(balance_profile PRIVATE pipebal::balance pipebal::launch)
CMAKE
cmake -S "$scratch/torch_free" -B "$scratch/torch_free/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_DISABLE_FIND_PACKAGE_Torch=TRUE >/dev/null
cmake --build "$scratch/torch_free/build" -j2 >/dev/null
"$scratch/torch_free/build/balance_profile" "$demo_profile" 2 >/dev/null
# A torch component that is required fails the search there, with CMake's reason.
sed -i 's/OPTIONAL_COMPONENTS pipeline/pipeline/' "$scratch/torch_free/CMakeLists.txt"
if cmake -S "$scratch/torch_free" -B "$scratch/torch_free/required" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_DISABLE_FIND_PACKAGE_Torch=TRUE >"$scratch/required.txt" 2>&1; then
  echo "check-install: a required torch component was found without LibTorch" >&2
  exit 1
fi
grep -q "Torch" "$scratch/required.txt"
# Only the headers: the CUPTI wrapper (cupti.h) and the report results stay out.
test ! -e "$prefix/include/pipebal/profiler/cupti_check.h"
test ! -e "$prefix/include/pipebal/reports/examples"

# The balancer without LibTorch or CMake: pkg-config only.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig
flags=$(pkg-config --cflags --libs pipebal-balance)
c++ -std=c++17 "$source_dir/examples/balance_profile/main.cpp" -o "$scratch/balance_pc" $flags
"$scratch/balance_pc" "$source_dir/reports/examples/demo/profile.json" 2
echo "check-install: installed package, both examples and pkg-config build work"
