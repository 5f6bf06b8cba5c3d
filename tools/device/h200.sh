#!/usr/bin/env bash
# On the lent GPU machine: Forge's GPU benchmarks and the PyTorch / HF peers in one run.
#   tools/device/h200.sh OUT_DIR [--train]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: h200.sh OUT_DIR [--train]}
shift
source "$root/tools/device/env.sh"
nvidia-smi -L
"$bin/forge" info --backend webgpu --format json > "$out/info.json"; "$bin/forge" info --backend webgpu | grep -v "^           0x"
run() { echo "== $*"; "$@"; }
for shape in "--n-layer 12 --n-head 12 --n-embd 768" "--n-layer 6 --n-head 6 --n-embd 384"; do
  tag=$(echo "$shape" | awk '{print $2 "L" $6}')
  # shellcheck disable=SC2086
  run "$bin/forge" bench --backend webgpu $shape --prompt-tokens 16 --decode-tokens 128 --format json | tee "$out/decode_$tag.json"
  # 20 runs: the first few of a cold GPU take 3-5x longer (clocks); the best is reported.
  # shellcheck disable=SC2086
  run "$bin/forge" bench --backend webgpu $shape --prompt-tokens 1024 --decode-tokens 0 --repeats 20 --format json | tee "$out/prefill_$tag.json"
done
[ -x "$bin/bench_webgpu_matmul" ] && run "$bin/bench_webgpu_matmul" | tee "$out/webgpu_matmul.txt"
if [ "${1:-}" = "--train" ]; then
  # Forge's training throughput at batch 8 x 1024 BPE tokens: steady-state tokens/s between
  # steps 3 and 11 of train_log.csv (step 1 compiles the pipelines; the last step also evaluates).
  corpus="$root/data/sotu.txt"
  [ -f "$corpus" ] || { xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt && corpus=/tmp/sotu.txt; }
  for shape in "--n-layer 12 --n-head 12 --n-embd 768" "--n-layer 6 --n-head 6 --n-embd 384"; do
    tag=$(echo "$shape" | awk '{print $2 "L" $6}')
    # shellcheck disable=SC2086
    "$bin/forge" train --backend webgpu --tokenizer bpe --bpe-dir "$root/third_party/gpt2" \
      --corpus "$corpus" --out "/tmp/speed-$tag" --force $shape --n-ctx 1024 --batch 8 --steps 12 \
      --eval-interval 1000 --log-interval 1 > /dev/null 2>&1
    train_speed "/tmp/speed-$tag/train_log.csv" "forge train $tag" | tee "$out/train_speed_$tag.txt"
  done
fi
PYTHONUNBUFFERED=1 run python3 "$root/tools/peers/torch_peers.py" "$out/peers.json" "$@"
