#!/usr/bin/env bash
# On the lent GPU machine: trains candidate character models side by side on one GPU within a
# wall-clock budget, each with a full cosine schedule, and scores each on the SOTU tail the
# README quotes (the last 100 kB: inside the held-out 1 %, never trained on). A short joint
# calibration run measures each candidate's tokens/s while the others run too, and sets its step
# count so that every schedule ends inside the budget. Per candidate OUT_DIR/NAME gets
# model.compact (8-bit), score.json, meta.tar (config, vocab, log, loss plots, stdout).
#   tools/device/train_char_sweep.sh OUT_DIR SECONDS "NAME FLAGS..." ["NAME FLAGS..." ...]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: train_char_sweep.sh OUT_DIR SECONDS "NAME FLAGS..." ...}
budget=${2:?usage: train_char_sweep.sh OUT_DIR SECONDS "NAME FLAGS..." ...}
shift 2
for deb in "$root"/.gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
mkdir -p /tmp/forge && tar -C /tmp/forge -xJf "$root/.device/bundle.tar.xz"
bin=/tmp/forge/bin
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES="$icd"
xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt
tail -c 100000 /tmp/sotu.txt > /tmp/tail.txt
common=(--backend webgpu --corpus /tmp/sotu.txt --val-fraction 0.01 --eval-batches 8 --seed 1337
        --format json --force)
names=() flags=()
for spec in "$@"; do names+=("${spec%% *}"); flags+=("${spec#* }"); done

# Calibration: all candidates at once for 40 steps; the rate is the last logged tokens/s.
start=$(date +%s)
for i in "${!names[@]}"; do
  # shellcheck disable=SC2086
  "$bin/forge" train "${common[@]}" ${flags[$i]} --out "/tmp/cal-${names[$i]}" --steps 40 \
    --warmup-steps 10 --eval-interval 1000 --log-interval 10 > "/tmp/cal-${names[$i]}.txt" 2>&1 &
done
wait
left=$((budget - ($(date +%s) - start) - 60))  # a minute for final validation, saving, scoring
echo "calibration took $(( $(date +%s) - start )) s; $left s left for training"

for i in "${!names[@]}"; do
  name=${names[$i]}
  rate=$(tail -1 "/tmp/cal-$name/train_log.csv" | cut -d, -f5)
  # shellcheck disable=SC2086
  set -- ${flags[$i]}
  batch=16 ctx=128
  while [ $# -gt 0 ]; do
    case "$1" in --batch) batch=$2 ;; --n-ctx) ctx=$2 ;; esac
    shift
  done
  steps=$(awk -v r="$rate" -v s="$left" -v t=$((batch * ctx)) 'BEGIN { printf "%d", 0.92 * r * s / t }')
  warm=$((steps / 12))
  echo "$name: $rate tokens/s in calibration -> $steps steps (warmup $warm)"
  mkdir -p "$out/$name"
  (
    run=/tmp/run-$name
    # shellcheck disable=SC2086
    timeout $((left + 50)) "$bin/forge" train "${common[@]}" ${flags[$i]} --out "$run" \
      --steps "$steps" --warmup-steps "$warm" --eval-interval $((steps / 6)) \
      --log-interval 25 > "$run.stdout.txt" 2>&1
    echo "train exit $? after $(( $(date +%s) - start )) s" >> "$run.stdout.txt"
    "$bin/forge" convert --input "$run/model.safetensors" --output "$run/model.compact" \
      --to compact --bits 8 --format json > /dev/null 2>> "$run.stdout.txt"
    cp "$run/model.compact" "$out/$name/"
    mkdir -p /tmp/ship-$name && cp "$run/config.json" "$run/vocab.json" "$run/model.compact" /tmp/ship-$name/
    "$bin/forge" score --backend webgpu --model "/tmp/ship-$name" --file /tmp/tail.txt --format json \
      > "$out/$name/score.json" 2>> "$run.stdout.txt"
    tar -C "$run" -cf "$out/$name/meta.tar" config.json vocab.json train_log.csv \
      $(cd "$run" && ls loss.* train_config.json 2>/dev/null) -C /tmp "run-$name.stdout.txt"
  ) &
done
wait
for name in "${names[@]}"; do
  echo "$name: $(tail -2 "/tmp/run-$name.stdout.txt" | head -1 | cut -c1-200)"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in d if not isinstance(d[k], list)})" \
    "$out/$name/score.json" 2>/dev/null || echo "$name: no score"
done
ls -la "$out"/*
