#!/usr/bin/env bash
# The long fuzzing run on the lent GPU machine's CPU cores: every harness at once, each to RUNS
# executions or SECONDS, as fuzz/run.sh runs them here. The machine has no compiler or Debian
# libraries, so `fuzz_long.sh --pack` here packs the ASan + UBSan harnesses built by
# scripts/sanitize.sh (build-sanitize/fuzz) and the shared libraries they link into
# .device/fuzz.tar.xz; carry .device and run `fuzz_long.sh OUT_DIR SECONDS RUNS [NAME...]` there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--pack" ]; then
  build="${FORGE_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
  stage=$(mktemp -d)
  mkdir -p "$stage/fuzz"
  cp "$build"/fuzz/fuzz_* "$stage/fuzz/"
  rm -f "$stage/fuzz/fuzz_make_seeds"
  for lib in $(ldd "$stage"/fuzz/* | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|^ld-linux/ {print $3}' | sort -u); do
    cp -L "$lib" "$stage/fuzz/"
  done
  mkdir -p "$root/.device"
  tar -C "$stage" -cJf "$root/.device/fuzz.tar.xz" fuzz
  rm -rf "$stage"
  du -h "$root/.device/fuzz.tar.xz"
  exit 0
fi
out=${1:?usage: fuzz_long.sh --pack | OUT_DIR SECONDS RUNS [NAME...]}
seconds=${2:?usage: fuzz_long.sh OUT_DIR SECONDS RUNS [NAME...]}
runs=${3:?usage: fuzz_long.sh OUT_DIR SECONDS RUNS [NAME...]}
shift 3
build=/tmp/fuzz-long
mkdir -p "$out" "$build"
tar -C "$build" -xJf "$root/.device/fuzz.tar.xz"
export LD_LIBRARY_PATH="$build/fuzz${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
FORGE_FUZZ_PREBUILT=1 FORGE_FUZZ_PARALLEL=1 FORGE_FUZZ_BUILD_DIR="$build" \
  bash "$root/fuzz/run.sh" "$seconds" "$runs" "$@" | tee "$out/table.txt" || rc=$?
cp "$build"/fuzz_*.log "$out/"
[ -z "$(ls -A "$build/artifacts")" ] || cp -r "$build/artifacts" "$out/"
exit "$rc"
