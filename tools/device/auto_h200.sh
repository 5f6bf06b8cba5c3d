#!/usr/bin/env bash
# On the lent GPU machine: what `forge generate --backend auto` picks, and why, for each model
# directory given and for a random-init GPT-2 124M, with each backend alone beside it: 300
# tokens from one prompt, greedy and then sampled. Prints a line per run and writes every run's
# JSON to OUT_DIR/auto.jsonl.   tools/device/auto_h200.sh OUT_DIR [MODEL_DIR...]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: auto_h200.sh OUT_DIR [MODEL_DIR...]}
shift
source "$root/tools/device/env.sh"
m124=/tmp/auto-gpt2-124m
xz -dc "$root/.device/sotu.txt.xz" | head -c 1000000 > /tmp/auto-corpus.txt
"$bin/forge" train --backend webgpu --tokenizer bpe --bpe-dir "$root/third_party/gpt2" \
  --corpus /tmp/auto-corpus.txt --out "$m124" --force --n-layer 12 --n-head 12 --n-embd 768 \
  --n-ctx 1024 --batch 1 --steps 1 > /tmp/auto-124m.log 2>&1 || tail -3 /tmp/auto-124m.log
for model in "$@" "$m124"; do
  for mode in "--greedy" "--temperature 0.8 --top-k 40 --seed 7"; do
    for backend in auto cpu webgpu; do
      # shellcheck disable=SC2086
      if "$bin/forge" generate --backend "$backend" --model "$model" --max-tokens 300 --ignore-eos \
        --prompt "The state of the Union is" $mode --format json > /tmp/auto.json 2> /tmp/auto.err; then
        python3 - "$model" "$mode" "$backend" /tmp/auto.json "$out/auto.jsonl" <<'PY'
import json, sys
model, mode, backend, path, log = sys.argv[1:]
r = json.load(open(path))
r.update(model=model, mode=mode, asked=backend)
open(log, "a").write(json.dumps(r) + "\n")
line = f"{model} {mode} --backend {backend}: {r['tokens_per_s']:.0f} tokens/s on {r['backend']}"
if "backend_choice" in r:
    line += f"\n    auto: {r['backend_choice']['reason']}"
print(line)
PY
      else
        echo "$model $mode --backend $backend failed: $(tail -2 /tmp/auto.err)"
      fi
    done
  done
done
