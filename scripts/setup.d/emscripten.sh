#!/usr/bin/env bash
# The browser build's toolchain: Debian's Emscripten 3.1.6 (clang, binaryen, its node glue).
# Idempotent. Usage: emscripten.sh <root>
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! dpkg-query -W -f='${Status}' emscripten 2>/dev/null | grep -q "install ok installed"; then
  echo "emscripten: installing Debian's emscripten"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends emscripten
fi
