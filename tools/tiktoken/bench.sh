#!/usr/bin/env bash
# Encodes the State of the Union corpus with Forge and with tiktoken in one run and prints
# both MB/s, the ratio, and whether the ids are identical. Builds bench_tokenizer into
# $FORGE_BUILD_DIR (default build/) first. Extra arguments go to it (e.g. --runs 10).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build="${FORGE_BUILD_DIR:-$root/build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFORGE_BUILD_BENCH=ON >/dev/null
fi
ninja -C "$build" -j "${FORGE_BUILD_JOBS:-$(nproc)}" bench_tokenizer >/dev/null
exec "$build/bench/bench_tokenizer" --root "$root" "$@"
