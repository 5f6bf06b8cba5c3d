#!/usr/bin/env bash
# The README's test command: set up, build everything, run every test, then the second build
# under ASan + UBSan with the native suite and a bounded fuzzing run (scripts/sanitize.sh;
# FORGE_TEST_SANITIZE=1 turns it on).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
# Setup installs lavapipe, so the WebGPU cases must run (test discovery reads this too).
export FORGE_TEST_REQUIRE_WEBGPU="${FORGE_TEST_REQUIRE_WEBGPU:-1}"
# The browser module (web.site_build in the suite would build it too; here its errors come first).
bash "$root/scripts/build_web.sh"
bash "$root/scripts/build.sh" -DFORGE_BUILD_TESTS=ON -DFORGE_BUILD_BENCH=ON "$@"
build="${FORGE_BUILD_DIR:-$root/build}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900
if [ "${FORGE_TEST_SANITIZE:-0}" != 0 ]; then
  bash "$root/scripts/sanitize.sh" "${FORGE_TEST_FUZZ_SECONDS:-30}"
fi
