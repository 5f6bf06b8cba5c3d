#!/usr/bin/env bash
# The browser tests' dependencies: Debian's Chromium and npm playwright-core, pinned, into
# third_party/npm-browser (ignored by git). Playwright drives the system Chromium through
# executablePath, so no browser is ever downloaded. Idempotent. Usage: browser.sh <root>
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  echo "browser: installing chromium"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
fi

pin="playwright-core@1.65.1"
dir="$root/third_party/npm-browser"
stamp="$root/third_party/.stamps/npm-browser"
if [ "$(cat "$stamp" 2>/dev/null)" != "$pin" ] || [ ! -d "$dir/node_modules/playwright-core" ]; then
  echo "browser: installing npm $pin"
  mkdir -p "$dir" "$(dirname "$stamp")"
  [ -f "$dir/package.json" ] || echo '{"name":"forge-browser-tests","private":true}' > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --save-exact "$pin" >/dev/null)
  echo "$pin" > "$stamp"
fi
