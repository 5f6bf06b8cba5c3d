#!/usr/bin/env bash
# Packs what a GPU machine without Debian's libraries needs to run Forge's binaries into
# .device/bundle.tar.xz (git-ignored): the CLI and benchmarks, Dawn, the Vulkan loader, and the
# shared libraries the binaries link. Run after scripts/build.sh; carry `.device` to the machine
# and run tools/device/h200.sh there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build="${FORGE_BUILD_DIR:-$root/build}"
stage=$(mktemp -d)
mkdir -p "$stage/bin"
for exe in forge bench/bench_webgpu_matmul bench/bench_webgpu_ops; do
  [ -x "$build/$exe" ] && cp "$build/$exe" "$stage/bin/"
done
cp "$root/third_party/npm/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so" "$stage/bin/"
cp "$root/third_party/vulkan/lib/libvulkan.so.1" "$stage/bin/"
# Every library the binaries link beyond glibc and the C++ runtime (fmt, utf8proc, cpp-httplib
# and what it pulls in): the GPU machine is not Debian and has none of them.
for lib in $(ldd "$stage"/bin/* | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|^ld-linux/ {print $3}' | sort -u); do
  cp -L "$lib" "$stage/bin/"
done
# forge top's terminal description (tools/device/top_nvml.sh): the GPU machine has no terminfo.
mkdir -p "$stage/bin/terminfo/x"
cp /usr/share/terminfo/x/xterm-256color "$stage/bin/terminfo/x/" 2>/dev/null ||
  cp /lib/terminfo/x/xterm-256color "$stage/bin/terminfo/x/"
mkdir -p "$root/.device"
tar -C "$stage" -cJf "$root/.device/bundle.tar.xz" bin
# The training corpus, compressed, for tools/device/train_124m.sh and profile.sh.
[ -f "$root/data/sotu.txt" ] && xz -9 -T0 -c "$root/data/sotu.txt" > "$root/.device/sotu.txt.xz"
rm -rf "$stage"
du -h "$root/.device/bundle.tar.xz"
