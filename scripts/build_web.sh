#!/usr/bin/env bash
# Builds the browser module with Debian's Emscripten into build-web/ (or $FORGE_WEB_BUILD_DIR)
# and assembles the site forge serve serves: build-web/site/ = web/* + forge_wasm.{js,wasm}.
# Idempotent; installs nothing (scripts/setup.d/emscripten.sh does). Extra arguments go to CMake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${FORGE_WEB_BUILD_DIR:-$root/build-web}"
mkdir -p "$build"
build=$(cd "$build" && pwd)
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"  # Debian's emcc needs its node modules
command -v emcmake >/dev/null || { echo "build_web: emcmake not found: run scripts/setup.sh" >&2; exit 1; }

# The tokenizer's Unicode classes as a table, written by a host tool from libutf8proc (which
# has no wasm build). Rewritten only when it changes, so a rebuild recompiles nothing.
host="$build/host"
mkdir -p "$host"
gen="$host/char_class_table"
gen_src=("$root/tools/char_class_table/char_class_table.cpp" "$root/src/forge/tokenizer/char_class.cpp")
if [ ! -x "$gen" ] || [ -n "$(find "${gen_src[@]}" "$root/src/forge/tokenizer/char_class.h" -newer "$gen")" ]; then
  # shellcheck disable=SC2046
  "${CXX:-c++}" -std=c++20 -O2 -Wall -Wextra -Werror -I"$root/src" "${gen_src[@]}" \
    $(pkg-config --cflags --libs libutf8proc) -o "$gen"
fi
"$gen" > "$host/char_class_ranges.inc.new"
if cmp -s "$host/char_class_ranges.inc.new" "$host/char_class_ranges.inc"; then
  rm "$host/char_class_ranges.inc.new"
else
  mv "$host/char_class_ranges.inc.new" "$host/char_class_ranges.inc"
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
emcmake cmake -S "$root" -B "$build" -G Ninja -DFORGE_WEB=ON \
  -DCMAKE_BUILD_TYPE="${FORGE_BUILD_TYPE:-Release}" \
  -DFORGE_CHAR_CLASS_RANGES="$host/char_class_ranges.inc" "${launcher[@]}" "$@" >/dev/null
ninja -C "$build" -j "${FORGE_BUILD_JOBS:-$(nproc)}" forge_wasm

# The site, replaced whole so a file removed from web/ disappears from it too.
rm -rf "$build/site.new"
mkdir -p "$build/site.new"
cp -R "$root/web/." "$build/site.new/"
# Linked into forge_wasm.js, and documentation: not served.
rm "$build/site.new/forge_webgpu_fixes.js" "$build/site.new/README.md"
cp "$build/forge_wasm.js" "$build/forge_wasm.wasm" "$build/site.new/"
# Left alone when current: the test suite runs this beside tests that serve the site.
if diff -rq "$build/site.new" "$build/site" >/dev/null 2>&1; then
  rm -rf "$build/site.new"
else
  rm -rf "$build/site"
  mv "$build/site.new" "$build/site"
fi
echo "build_web: site in $build/site"
