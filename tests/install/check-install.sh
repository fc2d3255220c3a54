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
test -x "$prefix/bin/pipebal"
test -x "$prefix/bin/pipebal-torch"
# `pipebal` balances itself and hands model commands to pipebal-torch beside it.
"$prefix/bin/pipebal" balance "$source_dir/reports/examples/demo/profile.json" --stages 2 >/dev/null
"$prefix/bin/pipebal" models >/dev/null

torch_prefix=$(grep -m1 '^Torch_DIR:' "$build/CMakeCache.txt" | cut -d= -f2)
cmake -S "$source_dir/examples" -B "$scratch/examples" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$torch_prefix" >/dev/null
cmake --build "$scratch/examples" -j2 >/dev/null

"$scratch/examples/balance_profile" "$source_dir/reports/examples/demo/profile.json" 3
"$scratch/examples/train_pipeline" 2 6

# The balancer without LibTorch or CMake: pkg-config only.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig
flags=$(pkg-config --cflags --libs pipebal-balance)
c++ -std=c++17 "$source_dir/examples/balance_profile/main.cpp" -o "$scratch/balance_pc" $flags
"$scratch/balance_pc" "$source_dir/reports/examples/demo/profile.json" 2
echo "check-install: installed package, both examples and pkg-config build work"
