#!/usr/bin/env bash
# On the lent GPU machine: Forge's decode/prefill and per-op times under variant switches
# (env vars), for tuning the WebGPU kernels. tools/device/perf.sh OUT_DIR [peers]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: perf.sh OUT_DIR [peers]}
source "$root/tools/device/env.sh"
big="--n-layer 12 --n-head 12 --n-embd 768" small="--n-layer 6 --n-head 6 --n-embd 384"
b() { echo "== $*"; env "$@" 2>&1 | grep -E "prefill |decode |dispatch|error|Error"; }
# Variants: "ENV=VAL ..." strings, one line each, from $FORGE_PERF_VARIANTS (default: the build's own).
variants=${FORGE_PERF_VARIANTS:-"X=1"}
while IFS= read -r v; do
  # shellcheck disable=SC2086
  b $v "$bin/forge" bench --backend webgpu $big --prompt-tokens 16 --decode-tokens 128
  # shellcheck disable=SC2086
  b $v "$bin/forge" bench --backend webgpu $big --prompt-tokens 1024 --decode-tokens 0
done <<< "$variants"
b X=1 "$bin/forge" bench --backend webgpu $small --prompt-tokens 16 --decode-tokens 128
b X=1 "$bin/forge" bench --backend webgpu $small --prompt-tokens 1024 --decode-tokens 0
ops=${FORGE_PERF_OPS:-}
while IFS= read -r v; do
  [ -z "$v" ] && continue
  echo "== ops $v"
  # shellcheck disable=SC2086
  env FORGE_BENCH_SECONDS=0.05 $v "$bin/bench_webgpu_ops" 2>&1
done <<< "$ops"
if [ "${2:-}" = peers ]; then
  PYTHONUNBUFFERED=1 python3 "$root/tools/peers/torch_peers.py" "$out/peers.json"
fi
