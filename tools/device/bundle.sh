#!/usr/bin/env bash
# Packs what a GPU machine without Debian's libraries needs to run Forge's binaries into
# .device/bundle.tar.xz (git-ignored): the CLI and benchmarks, Dawn, the Vulkan loader, and the
# shared libraries the binaries link. Run after scripts/build.sh; carry `.device` to the machine
# and run tools/device/h200.sh there. `--no-mpi` leaves Open MPI out (about 6 MB) for a run that
# needs no data parallelism, since what travels to the machine is limited.
#   tools/device/bundle.sh [--no-mpi]
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
# Every library the binaries link beyond glibc and the C++ runtime (fmt, utf8proc, libmicrohttpd
# and what it pulls in): the GPU machine is not Debian and has none of them.
for lib in $(ldd "$stage"/bin/* | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|^ld-linux/ {print $3}' | sort -u); do
  cp -L "$lib" "$stage/bin/"
done
# forge top's terminal description (tools/device/top_nvml.sh): the GPU machine has no terminfo.
mkdir -p "$stage/bin/terminfo/x"
cp /usr/share/terminfo/x/xterm-256color "$stage/bin/terminfo/x/" 2>/dev/null ||
  cp /lib/terminfo/x/xterm-256color "$stage/bin/terminfo/x/"
# Open MPI's runtime for data-parallel runs (tools/device/distributed_h200.sh), when this build
# has the MPI plugin: mpirun, the plugin, Open MPI's libraries, components and help texts, and
# PMIx, under mpi/usr as Debian lays them out; OPAL_PREFIX relocates them on the machine.
dirs=bin
if [ "${1:-}" != "--no-mpi" ] && [ -f "$build/libforge_mpi.so" ] && command -v ompi_info >/dev/null; then
  cp "$build/libforge_mpi.so" "$stage/bin/"
  [ -x "$build/bench/bench_allreduce" ] && cp "$build/bench/bench_allreduce" "$stage/bin/"
  mpi="$stage/mpi/usr"
  libdir=$(ompi_info --path libdir --parsable | cut -d: -f3)  # …/openmpi/lib (symlinks to ../..)
  pkgdata=$(ompi_info --path pkgdatadir --parsable | cut -d: -f3)
  arch_lib=$(dirname "$(dirname "$libdir")")                   # /usr/lib/x86_64-linux-gnu
  mkdir -p "$mpi/bin" "$mpi${libdir#/usr}" "$mpi${pkgdata#/usr}" "$stage/mpi/lib"
  cp -L "$(readlink -f "$(command -v mpirun)")" "$mpi/bin/mpirun"
  cp -L "$(readlink -f "$(command -v orted)")" "$mpi/bin/orted"
  cp -rL "$libdir/." "$mpi${libdir#/usr}/"
  cp -r "$pkgdata/." "$mpi${pkgdata#/usr}/"
  cp -rL "$arch_lib/pmix2" "$mpi${arch_lib#/usr}/"
  # Every library those link, beyond glibc, in one directory on LD_LIBRARY_PATH.
  for lib in $(find "$stage/mpi" "$stage/bin/libforge_mpi.so" -type f \( -name '*.so*' -o -perm -u+x \) \
      -exec ldd {} + 2>/dev/null | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|^ld-linux/ {print $3}' | sort -u); do
    cp -Ln "$lib" "$stage/mpi/lib/" 2>/dev/null || true
  done
  dirs="bin mpi"
fi
mkdir -p "$root/.device"
# shellcheck disable=SC2086
tar -C "$stage" -cJf "$root/.device/bundle.tar.xz" $dirs
# The training corpus, compressed, for tools/device/train_124m.sh and profile.sh.
[ -f "$root/data/sotu.txt" ] && xz -9 -T0 -c "$root/data/sotu.txt" > "$root/.device/sotu.txt.xz"
rm -rf "$stage"
du -h "$root/.device/bundle.tar.xz"
