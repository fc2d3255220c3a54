#!/usr/bin/env bash
# Renders a pipebal HTML report in Debian's headless Chromium and saves two screenshots:
# OUT.png at desktop width (1280) and OUT-phone.png at phone width (390). Used to check that
# the self-contained report really renders in a browser; nothing is fetched from the network.
#
#   tools/screenshot-report.sh DIR OUT.png          # DIR/report.html (made with `pipebal report`
#                                                   # first when absent)
#   tools/screenshot-report.sh page.html OUT.png    # any report file
#
# Environment: CHROMIUM (default /usr/bin/chromium), PIPEBAL (default build/tools/pipebal),
# HEIGHT / PHONE_HEIGHT (screenshot heights in CSS pixels, default 2000 / 2400).
set -euo pipefail

usage() { echo "usage: $0 DIR|REPORT.html OUT.png" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
input=$1
out=$2
chromium=${CHROMIUM:-/usr/bin/chromium}
pipebal=${PIPEBAL:-build/tools/pipebal}

if [[ ! -x $chromium ]]; then
  echo "$0: error: Chromium not found at '$chromium' (apt-get install chromium, or set CHROMIUM)" >&2
  exit 2
fi
if [[ -d $input ]]; then
  html="$input/report.html"
  if [[ ! -f $html ]]; then
    [[ -x $pipebal ]] || { echo "$0: error: no $html and no pipebal binary at '$pipebal'" >&2; exit 2; }
    "$pipebal" report "$input" >/dev/null
  fi
elif [[ -f $input ]]; then
  html=$input
else
  echo "$0: error: '$input' is neither a directory nor a file" >&2
  exit 2
fi
[[ $out == *.png ]] || { echo "$0: error: OUT must end in .png, got '$out'" >&2; exit 2; }

html_url="file://$(cd "$(dirname "$html")" && pwd)/$(basename "$html")"
phone_out="${out%.png}-phone.png"
profile_dir=$(mktemp -d)
trap 'rm -rf "$profile_dir"' EXIT

shoot() {  # WIDTH HEIGHT FILE
  local width=$1 height=$2 file=$3
  rm -f "$file"
  # Every switch that could reach the network is off: the page must render from the file alone.
  "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-default-apps --hide-scrollbars --force-device-scale-factor=1 \
    --user-data-dir="$profile_dir" --window-size="$width,$height" \
    --screenshot="$(cd "$(dirname "$file")" && pwd)/$(basename "$file")" "$html_url" \
    >/dev/null 2>&1 || true
  if [[ ! -s $file ]]; then
    echo "$0: error: Chromium wrote no screenshot for $html_url at ${width}x$height" >&2
    exit 1
  fi
  echo "$file"
}

shoot 1280 "${HEIGHT:-2000}" "$out"
shoot 390 "${PHONE_HEIGHT:-2400}" "$phone_out"
