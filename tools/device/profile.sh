#!/usr/bin/env bash
# On the lent GPU machine: where the WebGPU time goes. Per-kernel tables (FORGE_WEBGPU_PROFILE=1:
# every dispatch submitted and timed alone) for 124M prefill, decode and a training step, and
# prefill at several lengths with normal batching. tools/device/profile.sh OUT_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: profile.sh OUT_DIR}
source "$root/tools/device/env.sh"
# The corpus: data/sotu.txt (scripts/prepare_corpus.sh), or the xz copy bundle.sh leaves in .device
# (the checkout that travels to the machine has a size limit).
corpus="$root/data/sotu.txt"
if [ ! -f "$corpus" ] && [ -f "$root/.device/sotu.txt.xz" ]; then
  xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt && corpus=/tmp/sotu.txt
fi
big="--n-layer 12 --n-head 12 --n-embd 768"
b() { echo "== $*"; env "$@" 2>&1 | grep -E "prefill |decode |dispatch|error|Error"; }
# shellcheck disable=SC2086
FORGE_WEBGPU_PROFILE=1 "$bin/forge" bench --backend webgpu $big --prompt-tokens 1024 --decode-tokens 0 --repeats 2 > "$out/profile_prefill.txt" 2>&1
for t in 128 256 512 1024; do
  # shellcheck disable=SC2086
  b X=1 "$bin/forge" bench --backend webgpu $big --prompt-tokens $t --decode-tokens 0 --repeats 5
done
# shellcheck disable=SC2086
b FORGE_WEBGPU_TOGGLES=disable_robustness "$bin/forge" bench --backend webgpu $big --prompt-tokens 1024 --decode-tokens 0 --repeats 5
# shellcheck disable=SC2086
b FORGE_WEBGPU_TOGGLES=disable_robustness "$bin/forge" bench --backend webgpu $big --prompt-tokens 16 --decode-tokens 128
# shellcheck disable=SC2086
FORGE_WEBGPU_PROFILE=1 "$bin/forge" bench --backend webgpu $big --prompt-tokens 16 --decode-tokens 64 --repeats 1 > "$out/profile_decode.txt" 2>&1
if [ -f "$corpus" ]; then
  FORGE_WEBGPU_PROFILE=1 timeout 300 "$bin/forge" train --backend webgpu --tokenizer bpe --bpe-dir "$root/third_party/gpt2" \
    --corpus "$corpus" --out /tmp/profile-train --force $big --n-ctx 1024 --batch 8 --steps 2 \
    --eval-interval 1000 --log-interval 1 2>&1 | tr "\r" "\n" | grep -v "^\s*$" > "$out/profile_train.txt"
fi
