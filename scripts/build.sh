#!/usr/bin/env bash
# Configures and builds Forge into build/ (or $FORGE_BUILD_DIR). Extra arguments go to CMake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${FORGE_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${FORGE_BUILD_TYPE:-Release}" "$@" >/dev/null
# shellcheck disable=SC2086
ninja -C "$build" -j "${FORGE_BUILD_JOBS:-$(nproc)}" ${FORGE_BUILD_TARGETS:-}
