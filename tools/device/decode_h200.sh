#!/usr/bin/env bash
# On the lent GPU machine: decode with greedy steps in flight against one step per submit, the
# shipped model on WebGPU against the CPU backend on the same machine, and HF's GPT-2 decode as
# the peer, in one run of about two minutes.
#   here: bash tools/device/bundle.sh --no-mpi;  there: bash tools/device/decode_h200.sh OUT_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: decode_h200.sh OUT_DIR}
mkdir -p "$out"
source "$root/tools/device/env.sh"
nvidia-smi -L
run() { echo "== $*"; "$@"; }

# GPT-2 124M and 6L-384 shapes, random weights: 16 prompt tokens, 256 decoded, best of 5.
for shape in "--n-layer 12 --n-head 12 --n-embd 768" "--n-layer 6 --n-head 6 --n-embd 384"; do
  tag=$(echo "$shape" | awk '{print $2 "L" $6}')
  for k in 1 8 32; do
    # shellcheck disable=SC2086
    run "$bin/forge" bench --backend webgpu $shape --prompt-tokens 16 --decode-tokens 256 \
      --repeats 5 --steps-in-flight "$k" --format json > "$out/decode_${tag}_k$k.json"
    grep -o '"decode_ms_per_token":[0-9.e+-]*' "$out/decode_${tag}_k$k.json"
  done
done

# The shipped model, `forge generate` 300 greedy tokens: WebGPU (1, 8, 32 in flight) and the
# CPU backend on all of this machine's cores.
model="$root/models/forge-char"
gen() {
  "$bin/forge" generate --model "$model" --prompt "Fellow citizens" --greedy --ignore-eos \
    --max-tokens 300 --format json "$@" | grep -o '"tokens_per_s":[0-9.e+-]*'
}
{
  for k in 1 8 32; do
    gen --backend webgpu --steps-in-flight "$k" > /dev/null  # warm: pipelines compile once
    echo "webgpu, $k in flight: $(gen --backend webgpu --steps-in-flight "$k")"
  done
  echo "cpu, $(nproc) threads: $(gen --backend cpu --threads "$(nproc)")"
} | tee "$out/shipped_generate.txt"

PYTHONUNBUFFERED=1 run python3 "$root/tools/peers/torch_peers.py" "$out/peers.json"
