#!/usr/bin/env bash
# The HTML report renders in a real browser: headless Chromium screenshots the fixture report at
# desktop and phone width. Skipped (exit 77) where Chromium is not installed.
#   render_in_chromium.sh PIPEBAL_BINARY
set -euo pipefail
pipebal=$1
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "chromium not installed: skipped"; exit 77; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$pipebal" report "$root/tests/reports/fixtures/validation_dir" -o "$out/report.html" >/dev/null
bash "$root/tools/screenshot-report.sh" "$out/report.html" "$out/report.png"
for png in "$out/report.png" "$out/report-phone.png"; do
  # A blank page compresses to a few kilobytes; the rendered report is far larger.
  size=$(stat -c %s "$png")
  [ "$size" -gt 50000 ] || { echo "$png is only $size bytes: the report did not render"; exit 1; }
done
echo "rendered: $(stat -c %s "$out/report.png") and $(stat -c %s "$out/report-phone.png") bytes"
