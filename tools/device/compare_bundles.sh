#!/usr/bin/env bash
# On the lent GPU machine: the same GPU benchmarks from two builds, interleaved so that clocks
# and the other tenants weigh on both alike: GPT-2 124M and 6L-384 decode (16-token prompt, 128
# tokens) and 1024-token prefill (best of 20), twice each, before then after; with --train also
# training tokens/s at batch 8 x 1024 BPE tokens (steps 3-11, as tools/device/h200.sh --train).
#   tools/device/compare_bundles.sh OUT_DIR BEFORE_BUNDLE [--train]   (after: .device/bundle.tar.xz)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: compare_bundles.sh OUT_DIR BEFORE_BUNDLE}
before=${2:?usage: compare_bundles.sh OUT_DIR BEFORE_BUNDLE [--train]}
mkdir -p "$out"
FORGE_DEVICE_BUNDLE=$before FORGE_DEVICE_DEST=/tmp/forge-before source "$root/tools/device/env.sh"
bins=(before:/tmp/forge-before/bin after:/tmp/forge/bin)
FORGE_DEVICE_DEST=/tmp/forge source "$root/tools/device/env.sh"
for round in 1 2; do
  for shape in "--n-layer 12 --n-head 12 --n-embd 768" "--n-layer 6 --n-head 6 --n-embd 384"; do
    tag=$(echo "$shape" | awk '{print $2 "L" $6}')
    for entry in "${bins[@]}"; do
      name=${entry%%:*} dir=${entry#*:}
      # shellcheck disable=SC2086
      LD_LIBRARY_PATH="$dir" "$dir/forge" bench --backend webgpu $shape --prompt-tokens 16 \
        --decode-tokens 128 --format json > "$out/decode_${tag}_${name}_$round.json"
      # shellcheck disable=SC2086
      LD_LIBRARY_PATH="$dir" "$dir/forge" bench --backend webgpu $shape --prompt-tokens 1024 \
        --decode-tokens 0 --repeats 20 --format json > "$out/prefill_${tag}_${name}_$round.json"
      echo "$tag $name round $round: decode $(grep -o '"decode_ms_per_token":[^,}]*' \
        "$out/decode_${tag}_${name}_$round.json"), prefill $(grep -o '"prefill_ms":[^,}]*' \
        "$out/prefill_${tag}_${name}_$round.json")"
    done
  done
done
[ "${3:-}" = "--train" ] || exit 0
head -c 2000000 < <(xz -dc "$root/.device/sotu.txt.xz") > /tmp/compare-corpus.txt
for shape in "--n-layer 12 --n-head 12 --n-embd 768" "--n-layer 6 --n-head 6 --n-embd 384"; do
  tag=$(echo "$shape" | awk '{print $2 "L" $6}')
  for entry in "${bins[@]}"; do
    name=${entry%%:*} dir=${entry#*:}
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$dir" "$dir/forge" train --backend webgpu --tokenizer bpe \
      --bpe-dir "$root/third_party/gpt2" --corpus /tmp/compare-corpus.txt --out "/tmp/speed-$name" \
      --force $shape --n-ctx 1024 --batch 8 --steps 12 --eval-interval 1000 --log-interval 1 \
      > "$out/train_${tag}_$name.txt" 2>&1
    cp "/tmp/speed-$name/train_log.csv" "$out/train_${tag}_$name.csv"
    train_speed "$out/train_${tag}_$name.csv" "$tag $name: train"
  done
done
