#!/usr/bin/env bash
# Installs what pipebal needs to build, test and benchmark on Debian 12, with apt-get.
# Idempotent: packages already present are left alone. Exits non-zero with a clear message
# when a package cannot be had.
set -euo pipefail

packages=(
  cmake g++ make ccache git pkg-config
  libtorch-dev            # LibTorch 1.13 (CPU)
  libopenblas0-openmp     # without it LibTorch falls back to reference BLAS, ~18x slower
  libjemalloc-dev         # the allocator of pipebal's programs (workflow/malloc_tuning.h)
  nlohmann-json3-dev libfmt-dev libcli11-dev
  libgloo-dev             # headers of the Gloo library inside LibTorch (distributed/: c10d process groups)
  libgtest-dev libbenchmark-dev
  python3-torch           # regenerates the TorchScript test fixtures (tests/fixtures/make_fixtures.py)
  chromium                # renders report.html headless for the report's screenshot check
  clang libclang-rt-dev   # libFuzzer and the sanitizers' runtime for fuzz/ (make fuzz)
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to run apt-get" >&2; exit 1; }
  sudo_cmd=(sudo)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq || { echo "install-deps: apt-get update failed" >&2; exit 1; }
  if ! "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/pipebal-apt.log 2>&1; then
    tail -n 20 /tmp/pipebal-apt.log >&2
    echo "install-deps: apt-get could not install: ${missing[*]} (log: /tmp/pipebal-apt.log)" >&2
    exit 1
  fi
fi

# LibTorch links libblas.so.3; make sure the alternative resolves to OpenBLAS.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
case "$blas" in
  *openblas*) echo "install-deps: BLAS is OpenBLAS ($blas)" ;;
  *)
    echo "install-deps: the active BLAS is '$blas', not OpenBLAS; LibTorch would run ~18x slower." >&2
    echo "install-deps: fix with: update-alternatives --config libblas.so.3-x86_64-linux-gnu" >&2
    exit 1
    ;;
esac
