#!/usr/bin/env bash
# On the lent GPU machine: trains candidate character models side by side on one GPU within a
# wall-clock budget, each with a full cosine schedule, and scores each on the SOTU tail the
# README quotes (the last 100 kB: inside the held-out 1 %, never trained on). A short joint
# calibration run measures each candidate's tokens/s while the others run too, and sets its step
# count so that every schedule ends inside the budget. Per candidate OUT_DIR/NAME gets
# model.compact (8-bit) in 15 MB parts (the device returns files of at most 16 MB; `cat` joins
# them), score.json, meta.tar (config, vocab, log, loss plots, stdout).
# With RECENT_SECONDS set, each candidate then continues (--init-from) for that many seconds on
# .device/sotu-recent.txt.xz: the training split's addresses from 1961 on, which end where the
# validation split begins, so the model ends on the era it is scored on; score.json is then the
# continued model's and score-base.json the first phase's.
#   [RECENT_SECONDS=S] tools/device/train_char_sweep.sh OUT_DIR SECONDS "NAME FLAGS..." ...
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
recent=${RECENT_SECONDS:-0}
out=${1:?usage: train_char_sweep.sh OUT_DIR SECONDS "NAME FLAGS..." ...}
budget=${2:?usage: train_char_sweep.sh OUT_DIR SECONDS "NAME FLAGS..." ...}
shift 2
source "$root/tools/device/env.sh"
xz -dc "$root/.device/sotu.txt.xz" > /tmp/sotu.txt
tail -c 100000 /tmp/sotu.txt > /tmp/tail.txt
[ "$recent" -gt 0 ] && xz -dc "$root/.device/sotu-recent.txt.xz" > /tmp/recent.txt
common=(--backend webgpu --eval-batches 8 --seed 1337 --format json --force)
names=() flags=()
for spec in "$@"; do names+=("${spec%% *}"); flags+=("${spec#* }"); done

# Calibration: all candidates at once for 40 steps; the rate is that of steps 10-40 (step 1
# compiles the pipelines). train_log.csv's tokens/s (column 5) is the mean since step 0, so step
# s ends at s * tokens_per_step / column 5.
start=$(date +%s)
for i in "${!names[@]}"; do
  # shellcheck disable=SC2086
  "$bin/forge" train "${common[@]}" ${flags[$i]} --corpus /tmp/sotu.txt --val-fraction 0.01 \
    --out "/tmp/cal-${names[$i]}" --steps 40 \
    --warmup-steps 10 --eval-interval 1000 --log-interval 10 > "/tmp/cal-${names[$i]}.txt" 2>&1 &
done
wait
left=$((budget - ($(date +%s) - start) - 60 - recent))  # a minute for validation, saving, scoring
echo "calibration took $(( $(date +%s) - start )) s; $left s left for training"

for i in "${!names[@]}"; do
  name=${names[$i]}
  # shellcheck disable=SC2086
  set -- ${flags[$i]}
  batch=16 ctx=128 shape=()  # shape: the flags without the learning rates, for the second phase
  while [ $# -gt 0 ]; do
    case "$1" in --batch) batch=$2 ;; --n-ctx) ctx=$2 ;; esac
    case "$1" in --lr|--min-lr) ;; *) shape+=("$1" "$2") ;; esac
    shift 2
  done
  rate=$(awk -F, -v t=$((batch * ctx)) '$1 == 10 {a = 10 * t / $5} $1 == 40 {b = 40 * t / $5}
    END {printf "%.0f", 30 * t / (b - a)}' "/tmp/cal-$name/train_log.csv")
  steps=$(awk -v r="$rate" -v s="$left" -v t=$((batch * ctx)) 'BEGIN { printf "%d", 0.92 * r * s / t }')
  warm=$((steps / 12))
  more=$(awk -v r="$rate" -v s="$recent" -v t=$((batch * ctx)) 'BEGIN { printf "%d", 0.85 * r * s / t }')
  echo "$name: $rate tokens/s in calibration -> $steps steps (warmup $warm), then $more on the recent era"
  mkdir -p "$out/$name"
  (
    run=/tmp/run-$name
    # shellcheck disable=SC2086
    timeout $((left + 120)) "$bin/forge" train "${common[@]}" ${flags[$i]} --corpus /tmp/sotu.txt \
      --val-fraction 0.01 --out "$run" \
      --steps "$steps" --warmup-steps "$warm" --eval-interval $((steps / 6)) \
      --log-interval 25 > "$run.stdout.txt" 2>&1
    echo "train exit $? after $(( $(date +%s) - start )) s" >> "$run.stdout.txt"
    ship() {  # ship DIR SCORE_NAME: the 8-bit checkpoint of DIR, scored on the tail
      "$bin/forge" convert --input "$1/model.safetensors" --output "$1/model.compact" \
        --to compact --bits 8 --format json > /dev/null 2>> "$run.stdout.txt"
      mkdir -p "$1.ship" && cp "$1/config.json" "$1/vocab.json" "$1/model.compact" "$1.ship/"
      "$bin/forge" score --backend webgpu --model "$1.ship" --file /tmp/tail.txt --format json \
        > "$out/$name/$2" 2>> "$run.stdout.txt"
    }
    if [ "$recent" -gt 0 ]; then
      ship "$run" score-base.json
      # shellcheck disable=SC2086
      timeout $((recent + 30)) "$bin/forge" train "${common[@]}" "${shape[@]}" --corpus /tmp/recent.txt \
        --val-fraction 0.02 --init-from "$run" --out "$run-recent" --steps "$more" \
        --warmup-steps $((more / 10 + 1)) --lr 3e-4 --min-lr 3e-5 --eval-interval $((more / 4 + 1)) \
        --log-interval 25 > "$run-recent.stdout.txt" 2>&1
      echo "recent-era train exit $? after $(( $(date +%s) - start )) s" >> "$run.stdout.txt"
      cp "$run-recent/train_log.csv" "$run/train_log_recent.csv"
      cat "$run-recent.stdout.txt" >> "$run.stdout.txt"
      run=$run-recent
    fi
    ship "$run" score.json
    split -b 15M -d "$run/model.compact" "$out/$name/model.compact.part"
    tar -C "/tmp/run-$name" -cf "$out/$name/meta.tar" config.json vocab.json train_log.csv \
      $(cd "/tmp/run-$name" && ls loss.* train_config.json train_log_recent.csv 2>/dev/null) \
      -C /tmp "run-$name.stdout.txt"
  ) &
done
wait
for name in "${names[@]}"; do
  echo "$name: $(tail -2 "/tmp/run-$name.stdout.txt" | head -1 | cut -c1-200)"
  for f in "$out/$name"/score*.json; do
    echo "$name $(basename "$f"): $(grep -o '"mean_nll":[^,}]*' "$f" || echo "no score")"
  done
done
ls -la "$out"/*
