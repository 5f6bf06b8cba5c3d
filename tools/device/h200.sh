#!/usr/bin/env bash
# On the lent GPU machine: Forge's GPU benchmarks and the PyTorch / HF peers in one run.
#   tools/device/h200.sh OUT_DIR [--train]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: h200.sh OUT_DIR [--train]}
shift
# The machine has the NVIDIA driver but no Vulkan loader or GL dispatch libraries, which the
# driver's Vulkan ICD (libGLX_nvidia) needs: unpack Debian's, carried in .gl (see the device notes).
for deb in "$root"/.gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
mkdir -p /tmp/forge && tar -C /tmp/forge -xJf "$root/.device/bundle.tar.xz"
bin=/tmp/forge/bin
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES="$icd"
nvidia-smi -L
"$bin/forge" info --backend webgpu --format json > "$out/info.json"; "$bin/forge" info --backend webgpu | grep -v "^           0x"
run() { echo "== $*"; "$@"; }
for shape in "--n-layer 12 --n-head 12 --n-embd 768" "--n-layer 6 --n-head 6 --n-embd 384"; do
  tag=$(echo "$shape" | awk '{print $2 "L" $6}')
  # shellcheck disable=SC2086
  run "$bin/forge" bench --backend webgpu $shape --prompt-tokens 16 --decode-tokens 128 --format json | tee "$out/decode_$tag.json"
  # shellcheck disable=SC2086
  run "$bin/forge" bench --backend webgpu $shape --prompt-tokens 1024 --decode-tokens 0 --format json | tee "$out/prefill_$tag.json"
done
[ -x "$bin/bench_webgpu_matmul" ] && run "$bin/bench_webgpu_matmul" | tee "$out/webgpu_matmul.txt"
PYTHONUNBUFFERED=1 run python3 "$root/tools/peers/torch_peers.py" "$out/peers.json" "$@"
