#!/usr/bin/env bash
# CPU training speed against llm.c's train_gpt2.c, in the same run on this machine: GPT-2 124M,
# batch 4 × 64 (llm.c's own main), both from the same random initialisation shape, both on every
# core (OpenMP for llm.c, Forge's pool). Rounds alternate llm.c and Forge; each prints its
# steady-state seconds per step (llm.c's first 3 steps and Forge's first 4 are warm-up), and the
# last line is the ratio of the medians.
#   tools/peers/llmc_train.sh LLMC_DIR [ROUNDS]
# LLMC_DIR is a checkout of github.com/karpathy/llm.c; it is built into a temporary directory
# (with -Ofast -march=native -fopenmp, as its Makefile does) and not modified. llm.c reads a
# checkpoint and token files, written here: random weights (N(0, 0.02), LayerNorm γ = 1) and
# random token ids, which change nothing about its speed. Forge trains on data/sotu.txt
# (scripts/prepare_corpus.sh sotu data/sotu.txt) with the GPT-2 tokenizer.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
llmc=$(cd "${1:?usage: llmc_train.sh LLMC_DIR [ROUNDS]}" && pwd)
rounds=${2:-2}
threads=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result -I"$llmc" "$llmc/train_gpt2.c" -lm \
  -o "$work/train_gpt2"
python3 - "$work" <<'PY'
import array, os, random, struct, sys
work = sys.argv[1]
V, Vp, L, NH, C, T = 50257, 50304, 12, 12, 768, 1024
sizes = [Vp * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
         L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C]
gammas, biases = {2, 8, 14}, {3, 5, 7, 9, 11, 13, 15}
rng = random.Random(0)
noise = array.array("f", [rng.gauss(0.0, 0.02) for _ in range(1 << 16)])
with open(os.path.join(work, "gpt2_124M.bin"), "wb") as f:
    f.write(struct.pack("256i", 20240326, 3, T, V, L, NH, C, Vp, *[0] * 248))
    for i, n in enumerate(sizes):
        if i in gammas or i in biases:
            f.write(array.array("f", [1.0 if i in gammas else 0.0]).tobytes() * n)
        else:
            reps, rest = divmod(n, len(noise))
            f.write(noise.tobytes() * reps + noise[:rest].tobytes())
data = os.path.join(work, "dev/data/tinyshakespeare")
os.makedirs(data)
for split in ("train", "val"):
    with open(os.path.join(data, f"tiny_shakespeare_{split}.bin"), "wb") as f:
        f.write(struct.pack("256i", 20240520, 1, 200000, *[0] * 253))
        f.write(array.array("H", [rng.randrange(V) for _ in range(200000)]).tobytes())
PY
head -c 3000000 "$root/data/sotu.txt" > "$work/corpus.txt"

llmc_round() {  # steps 4-16 (llm.c validates at 10 and samples at 20, outside its step times)
  : > "$work/llmc.txt"
  (cd "$work" && OMP_NUM_THREADS=$threads exec stdbuf -oL ./train_gpt2 > llmc.txt 2>&1) &
  local pid=$!
  while kill -0 "$pid" 2> /dev/null && [ "$(grep -c took "$work/llmc.txt")" -lt 16 ]; do
    sleep 1
  done
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  awk '/took/ {n++; if (n > 3 && n <= 16) {s += $(NF - 1); k++}}
    END {if (!k) exit 1; printf "%.3f\n", s / k / 1000}' "$work/llmc.txt" ||
    { tail -5 "$work/llmc.txt" >&2; echo "llm.c printed no step times" >&2; exit 1; }
}
forge_round() {  # steps 5-23 from the log's elapsed column (the last step also validates)
  "$root/build/forge" train --backend cpu --threads "$threads" --tokenizer bpe \
    --bpe-dir "$root/third_party/gpt2" --corpus "$work/corpus.txt" --out "$work/forge" --force \
    --n-layer 12 --n-head 12 --n-embd 768 --n-ctx 64 --batch 4 --steps 24 --warmup-steps 2 \
    --eval-interval 1000 --eval-batches 1 --log-interval 1 --val-fraction 0.01 \
    > "$work/forge.txt" 2>&1 || { tail -5 "$work/forge.txt" >&2; exit 1; }
  awk -F, '$1 == 4 {a = $6} $1 == 23 {b = $6} END {printf "%.3f\n", (b - a) / 19}' \
    "$work/forge/train_log.csv"
}
l=() f=()
for r in $(seq "$rounds"); do
  l+=("$(llmc_round)") || exit 1
  f+=("$(forge_round)") || exit 1
  echo "round $r: llm.c ${l[-1]} s/step, Forge ${f[-1]} s/step (batch 4 x 64, $threads threads)"
done
median() {
  printf '%s\n' "$@" | sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
ml=$(median "${l[@]}") mf=$(median "${f[@]}")
awk -v l="$ml" -v f="$mf" 'BEGIN {
  printf "median: llm.c %.3f s/step (%.1f tokens/s), Forge %.3f s/step (%.1f tokens/s): %.2fx\n",
    l, 256 / l, f, 256 / f, l / f
}'
