#!/usr/bin/env bash
# On the lent GPU machine: trains the shipped character model (models/forge-char) from random
# init on the State of the Union corpus with Forge's WebGPU backend, converts it to the 8-bit
# compact checkpoint, and leaves in OUT_DIR what comes back: model.compact, the f32 weights in
# 15 MB parts (the device returns files of at most 16 MB), and meta.tar (config, vocabulary,
# log, loss curve, stdout). tools/device/train_char.sh OUT_DIR [forge train flags...]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: train_char.sh OUT_DIR [flags]}
shift
source "$root/tools/device/env.sh"
xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt
run=/tmp/forge-char
start=$(date +%s)
timeout "${FORGE_TRAIN_SECONDS:-540}" "$bin/forge" train --backend webgpu --corpus /tmp/sotu.txt \
  --out "$run" "$@" 2>&1 | tr '\r' '\n' | grep -E "step|val|rror" |
  awk 'NR % 20 == 1 || /val|rror/' | tee "$run.stdout.txt"
echo "wall: $(( $(date +%s) - start )) s" | tee -a "$run.stdout.txt"
"$bin/forge" convert --input "$run/model.safetensors" --output "$out/model.compact" --to compact --bits 8 2>&1 | tail -2
split -b 15M -d "$run/model.safetensors" "$out/model.safetensors.part"
tar -C "$run" -cf "$out/meta.tar" config.json vocab.json train_log.csv loss.png -C /tmp forge-char.stdout.txt
ls -la "$out"
