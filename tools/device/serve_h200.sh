#!/usr/bin/env bash
# On the lent GPU machine: forge serve's OpenAI API under 1-32 concurrent greedy streams of a
# GPT-2 124M-shaped model (GPT-2's BPE vocabulary, weights from one training step: the speed
# does not depend on them) on WebGPU, with bench/serve_bench.mjs. The machine has no node:
# carry .device/node.xz (`xz -c "$(command -v node)" > .device/node.xz`) and third_party/gpt2.
# Given another bundle, its forge serve runs too, alternating with this one's over two rounds.
#   tools/device/serve_h200.sh OUT_DIR [STREAMS] [BEFORE_BUNDLE]   (default 1,4,16,32)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: serve_h200.sh OUT_DIR [STREAMS] [BEFORE_BUNDLE]}
streams=${2:-1,4,16,32}
before=${3:-}
mkdir -p "$out"
if [ -n "$before" ]; then
  FORGE_DEVICE_BUNDLE=$before FORGE_DEVICE_DEST=/tmp/forge-before source "$root/tools/device/env.sh"
fi
FORGE_DEVICE_DEST=/tmp/forge source "$root/tools/device/env.sh"
node=$(command -v node || true)
if [ -z "$node" ]; then
  node=/tmp/node && xz -dc "$root/.device/node.xz" > "$node" && chmod +x "$node"
fi
head -c 2000000 < <(xz -dc "$root/.device/sotu.txt.xz") > /tmp/serve-corpus.txt
"$bin/forge" train --backend webgpu --tokenizer bpe --bpe-dir "$root/third_party/gpt2" \
  --corpus /tmp/serve-corpus.txt --out /tmp/serve-124m --force --n-layer 12 --n-head 12 \
  --n-embd 768 --n-ctx 1024 --batch 1 --steps 1 --warmup-steps 0 --eval-interval 1 \
  --eval-batches 1 > "$out/model_train.txt" 2>&1 || { tail -5 "$out/model_train.txt"; exit 1; }
bench() {  # bench BIN_DIR JSON
  LD_LIBRARY_PATH="$1" "$node" "$root/bench/serve_bench.mjs" --cli "$1/forge" --model /tmp/serve-124m \
    --backend webgpu --streams "$streams" --tokens 64 --repeat "${REPEAT:-2}" --json "$2"
}
if [ -z "$before" ]; then
  bench "$bin" "$out/serve-124m.json"
  exit
fi
for round in 1 2; do
  echo "== after, round $round" && bench "$bin" "$out/serve-124m-after-$round.json"
  echo "== before, round $round" && bench /tmp/forge-before/bin "$out/serve-124m-before-$round.json"
done
