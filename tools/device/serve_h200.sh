#!/usr/bin/env bash
# On the lent GPU machine: forge serve's OpenAI API under 1-32 concurrent greedy streams of a
# GPT-2 124M-shaped model (GPT-2's BPE vocabulary, weights from one training step: the speed
# does not depend on them) on WebGPU, with bench/serve_bench.mjs. The machine has no node:
# carry .device/node.xz (`xz -c "$(command -v node)" > .device/node.xz`) and third_party/gpt2.
#   tools/device/serve_h200.sh OUT_DIR [STREAMS]   (default 1,4,16,32)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: serve_h200.sh OUT_DIR [STREAMS]}
streams=${2:-1,4,16,32}
mkdir -p "$out"
source "$root/tools/device/env.sh"
node=$(command -v node || true)
if [ -z "$node" ]; then
  node=/tmp/node && xz -dc "$root/.device/node.xz" > "$node" && chmod +x "$node"
fi
head -c 2000000 < <(xz -dc "$root/.device/sotu.txt.xz") > /tmp/serve-corpus.txt
"$bin/forge" train --backend webgpu --tokenizer bpe --bpe-dir "$root/third_party/gpt2" \
  --corpus /tmp/serve-corpus.txt --out /tmp/serve-124m --force --n-layer 12 --n-head 12 \
  --n-embd 768 --n-ctx 1024 --batch 1 --steps 1 --warmup-steps 0 --eval-interval 1 \
  --eval-batches 1 > "$out/model_train.txt" 2>&1 || { tail -5 "$out/model_train.txt"; exit 1; }
"$node" "$root/bench/serve_bench.mjs" --cli "$bin/forge" --model /tmp/serve-124m --backend webgpu \
  --streams "$streams" --tokens 64 --repeat "${REPEAT:-2}" --json "$out/serve-124m.json"
