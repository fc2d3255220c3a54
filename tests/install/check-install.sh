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

# The package's components with and without LibTorch. A consumer asks for the torch-free ones and
# the engine as optional: where LibTorch cannot be found (CMAKE_DISABLE_FIND_PACKAGE_Torch) the
# package is found without pipebal::pipeline, where it can, with it.
mkdir -p "$scratch/optional" "$scratch/required"
cat >"$scratch/optional/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(optional CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(pipebal CONFIG REQUIRED COMPONENTS balance launch common
             OPTIONAL_COMPONENTS pipeline)
if(EXPECT_PIPELINE AND NOT (pipebal_pipeline_FOUND AND TARGET pipebal::pipeline))
  message(FATAL_ERROR "pipebal::pipeline not found where LibTorch is")
elseif(NOT EXPECT_PIPELINE AND (pipebal_pipeline_FOUND OR TARGET pipebal::pipeline))
  message(FATAL_ERROR "pipebal::pipeline found where LibTorch cannot be")
endif()
add_executable(balance_profile $source_dir/examples/balance_profile/main.cpp)
target_link_libraries(balance_profile PRIVATE pipebal::balance pipebal::launch)
CMAKE
cmake -S "$scratch/optional" -B "$scratch/optional/without" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_DISABLE_FIND_PACKAGE_Torch=TRUE -DEXPECT_PIPELINE=FALSE \
  >/dev/null
cmake --build "$scratch/optional/without" -j2 >/dev/null
"$scratch/optional/without/balance_profile" "$demo_profile" 2 >/dev/null
cmake -S "$scratch/optional" -B "$scratch/optional/with" -DCMAKE_PREFIX_PATH="$prefix" \
  -DTorch_DIR="$torch_prefix" -DEXPECT_PIPELINE=TRUE >/dev/null
# A torch component that is required makes the package require LibTorch: with it disabled, CMake
# refuses (it cannot disable a REQUIRED package), which only a required find_dependency meets.
cat >"$scratch/required/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(required CXX)
find_package(pipebal CONFIG REQUIRED COMPONENTS balance pipeline)
CMAKE
if cmake -S "$scratch/required" -B "$scratch/required/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_Torch=TRUE >"$scratch/required.txt" 2>&1; then
  echo "check-install: a required torch component was found without LibTorch" >&2
  exit 1
fi
if ! grep -q "called with REQUIRED, but" "$scratch/required.txt"; then
  cat "$scratch/required.txt" >&2
  echo "check-install: a required torch component failed for another reason than LibTorch" >&2
  exit 1
fi
# Only the headers: the CUPTI backend's (cupti.h) and the report results stay out.
test ! -e "$prefix/include/pipebal/profiler/cupti_check.h"
test ! -e "$prefix/include/pipebal/profiler/cupti_timer.h"
test ! -e "$prefix/include/pipebal/reports/examples"
# The libraries leave a user's allocator alone: neither the package nor a program built with it
# names jemalloc; pipebal's own program allocates through it where the build found it.
if grep -rq jemalloc "$prefix"/lib*/cmake/pipebal/ "$prefix"/lib/*/cmake/pipebal/ 2>/dev/null ||
  readelf -d "$scratch/examples/train_pipeline" | grep -q jemalloc; then
  echo "check-install: the installed package links jemalloc into a user's program" >&2
  exit 1
fi
if grep -q '^PIPEBAL_WITH_JEMALLOC:BOOL=ON' "$build/CMakeCache.txt" &&
  grep -q '^PIPEBAL_JEMALLOC_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt"; then
  readelf -d "$prefix/bin/pipebal-torch" | grep -q jemalloc
fi

# The balancer without LibTorch or CMake: pkg-config only.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig
flags=$(pkg-config --cflags --libs pipebal-balance)
c++ -std=c++17 "$source_dir/examples/balance_profile/main.cpp" -o "$scratch/balance_pc" $flags
"$scratch/balance_pc" "$source_dir/reports/examples/demo/profile.json" 2
echo "check-install: installed package, both examples and pkg-config build work"
