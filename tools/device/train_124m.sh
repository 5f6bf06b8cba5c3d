#!/usr/bin/env bash
# On the lent GPU machine: GPT-2 124M from random init on GPT-2 BPE tokens of the State of the
# Union corpus, on WebGPU, for at most FORGE_TRAIN_SECONDS (default 540) of wall time; the loss
# log and curve land in OUT_DIR. tools/device/train_124m.sh OUT_DIR [forge train flags...]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: train_124m.sh OUT_DIR [flags]}
shift
source "$root/tools/device/env.sh"
# The corpus: data/sotu.txt (scripts/prepare_corpus.sh), or the xz copy bundle.sh leaves in .device
# (the checkout that travels to the machine has a size limit).
corpus="$root/data/sotu.txt"
if [ ! -f "$corpus" ] && [ -f "$root/.device/sotu.txt.xz" ]; then
  xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt && corpus=/tmp/sotu.txt
fi
run=/tmp/gpt2-124m
start=$(date +%s)
timeout "${FORGE_TRAIN_SECONDS:-540}" "$bin/forge" train --backend webgpu --tokenizer bpe \
  --bpe-dir "$root/third_party/gpt2" --corpus "$corpus" --out "$run" \
  --n-layer 12 --n-head 12 --n-embd 768 --n-ctx 1024 --batch 8 "$@" 2>&1 | tr '\r' '\n' |
  grep -E "step|val|error|Error" | awk 'NR % 10 == 1 || /val|rror/' | tee "$out/train_stdout.txt"
echo "wall: $(( $(date +%s) - start )) s" | tee -a "$out/train_stdout.txt"
cp "$run"/train_log.csv "$run"/loss.png "$run"/config.json "$out/" 2>/dev/null
ls -la "$run"
