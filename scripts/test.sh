#!/usr/bin/env bash
# The README's test command: set up, build everything, run every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
# Setup installs lavapipe, so the WebGPU cases must run (test discovery reads this too).
export FORGE_TEST_REQUIRE_WEBGPU="${FORGE_TEST_REQUIRE_WEBGPU:-1}"
bash "$root/scripts/build.sh" -DFORGE_BUILD_TESTS=ON -DFORGE_BUILD_BENCH=ON "$@"
# The browser module; the native build then reconfigures (a no-op build) to register its tests.
bash "$root/scripts/build_web.sh"
bash "$root/scripts/build.sh"
build="${FORGE_BUILD_DIR:-$root/build}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900

