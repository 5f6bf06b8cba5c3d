#!/usr/bin/env bash
# forge top in a real terminal: tmux runs it, send-keys types, capture-pane reads the screen.
#   tests/top/top_tmux_test.sh build/forge
# Every wait polls the screen with a deadline (no fixed sleeps), so a slow, loaded machine only
# makes it slower. The models are trained and converted here, so their parameter counts come
# from `forge info`, not from this script.
set -euo pipefail
forge=$(realpath "$1")
work=$(mktemp -d)
sock="forge-top-test-$$"
train_pid=
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ -n "$train_pid" ] && kill "$train_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export LANG=C.UTF-8 TERM=xterm-256color
fail() {
  echo "FAIL: $*" >&2
  echo "--- screen ---" >&2
  tmux -L "$sock" capture-pane -p -t "${session:-top}" >&2 || true
  exit 1
}
screen() { tmux -L "$sock" capture-pane -p -t "$session"; }
# wait_for REGEX [SECONDS]: until the screen matches (grep -E).
wait_for() {
  local deadline=$((SECONDS + ${2:-60}))
  until screen | grep -qE -- "$1"; do
    [ $SECONDS -lt $deadline ] || fail "timed out waiting for /$1/"
    sleep 0.2
  done
}
keys() { tmux -L "$sock" send-keys -t "$session" "$@"; }
start() {  # start SESSION COLS ROWS COMMAND...: forge top in a shell, so its exit status shows
  session=$1
  tmux -L "$sock" new-session -d -s "$1" -x "$2" -y "$3" "bash --norc --noprofile"
  tmux -L "$sock" set-option -t "$1" window-size manual
  keys "PS1='$ '; cd $work" Enter
  keys "${*:4}; echo EXIT=\$?" Enter
}

# --- models: one trained here, its 4-bit conversion, and files that are not models ---
models="$work/models"
mkdir -p "$models"
awk 'BEGIN { for (i = 0; i < 400; i++) print "the cat sat on the mat and the dog ran in the park" }' \
  > "$work/corpus.txt"
tiny=(--corpus "$work/corpus.txt" --tokenizer char --n-layer 1 --n-head 2 --n-embd 32 --n-ctx 32
      --batch 4 --warmup-steps 2 --eval-batches 2 --backend cpu --threads 1)
"$forge" train "${tiny[@]}" --out "$models/tiny" --steps 20 --eval-interval 10 --log-interval 10 \
  --format json > /dev/null
mkdir -p "$models/tiny4"
cp "$models/tiny/config.json" "$models/tiny/vocab.json" "$models/tiny4/"
"$forge" convert --input "$models/tiny/model.safetensors" --output "$models/tiny4/model.compact" \
  --to compact --bits 4 --format json > /dev/null
mkdir -p "$models/corrupt" "$models/truncated" "$models/notes"
cp "$models/tiny/config.json" "$models/corrupt/"
echo "not a checkpoint" > "$models/corrupt/model.safetensors"
cp "$models/tiny/config.json" "$models/truncated/"
head -c 3000 "$models/tiny/model.safetensors" > "$models/truncated/model.safetensors"
echo "shopping list" > "$models/notes/todo.txt"
params() { "$forge" info --model "$1" --format json --backend cpu | sed -E 's/.*"parameters":([0-9]+).*/\1/'; }
loader_error() { "$forge" info --model "$1" --backend cpu 2>&1 >/dev/null | sed -E "s/.*: //" | cut -c1-20; }

# --- progress: drawn on a terminal, silent in a pipe and with --format json ---
# pipe-pane records every byte the terminal got, so the line erased at the end is still seen.
session=shell
tmux -L "$sock" new-session -d -s shell -x 120 -y 10 "bash --norc --noprofile"
tmux -L "$sock" pipe-pane -t shell -o "cat >> $work/tty.log"
keys "$forge score --model $models/tiny --text 'the cat sat on the mat' > /dev/null" Enter
keys "$forge convert --input $models/tiny/model.safetensors --output $work/tty.compact --to compact > /dev/null; echo CONVERTED" Enter
wait_for '^CONVERTED' 60
grep -q 'scoring \[#' "$work/tty.log" || fail "no progress line from forge score on a terminal"
grep -q 'reading .*tensors' "$work/tty.log" || fail "no progress line from forge convert on a terminal"
"$forge" score --model "$models/tiny" --text 'the cat sat on the mat' > /dev/null 2> "$work/pipe.err"
"$forge" convert --input "$models/tiny/model.safetensors" --output "$work/pipe.compact" \
  --to compact --format json > /dev/null 2>> "$work/pipe.err"
[ ! -s "$work/pipe.err" ] || fail "progress written into a pipe: $(cat "$work/pipe.err")"
echo "ok: progress on a terminal, none in a pipe or with --format json"

start top 150 40 "$forge" top --path "$models" --max-tokens 100000 --prompt "the "
wait_for 'models \(5\)' 60  # five directories mean to be models; notes/ does not
# Walk the list: each model's details show its full path and exact parameter count; the bad
# ones show the loader's error.
declare -A want=([tiny]=$(params "$models/tiny") [tiny4]=$(params "$models/tiny4")
                 [tiny/checkpoint]=$(params "$models/tiny/checkpoint"))
declare -A bad=([corrupt]=$(loader_error "$models/corrupt") [truncated]=$(loader_error "$models/truncated"))
declare -A seen=()
for _ in 1 2 3 4 5 6; do
  s=$(screen)
  for name in "${!want[@]}"; do
    grep -qE "$models/$name +[│|]" <<<"$s" && grep -q "parameters ${want[$name]} " <<<"$s" && seen[$name]=1
  done
  for name in "${!bad[@]}"; do
    grep -qE "$models/$name +[│|]" <<<"$s" && grep -qF "${bad[$name]}" <<<"$s" && seen[$name]=1
  done
  keys Down
  sleep 0.3
done
for name in "${!want[@]}" "${!bad[@]}"; do
  [ -n "${seen[$name]:-}" ] || fail "never saw $name with its parameter count or loader error"
done
screen | grep -q 'error' || fail "bad models are not marked"
echo "ok: the list shows ${!want[*]} with their parameter counts and marks ${!bad[*]}"

# --- select the trained model, generate, cancel ---
for _ in 1 2 3 4 5 6; do
  screen | grep -qE "$models/tiny +[│|]" && break
  keys Up
  sleep 0.3
done
screen | grep -qE "$models/tiny +[│|]" || fail "could not select $models/tiny"
keys Enter
wait_for 'generating +[0-9]+ tokens +[0-9.]*[1-9][0-9.]* tok/s' 60
wait_for 'prompt> the' 5
keys c
wait_for 'cancelled +[0-9]+ tokens' 10
count=$(screen | grep -oE 'cancelled +[0-9]+ tokens' | grep -oE '[0-9]+')
sleep 1
[ "$(screen | grep -oE 'cancelled +[0-9]+ tokens' | grep -oE '[0-9]+')" = "$count" ] ||
  fail "tokens still arrive after cancel"
echo "ok: generated $count tokens with a tokens/s figure, cancel stopped it"

# --- resize: 60 columns stack the panes; a tiny window says so ---
tmux -L "$sock" resize-window -t "$session" -x 60 -y 30
wait_for '^.. generate \(cpu\)' 10  # the generation pane's box now starts at column 0
screen | grep -qE '^.. models \(5\)' || fail "the list is not stacked above"
tmux -L "$sock" resize-window -t "$session" -x 30 -y 8
wait_for 'window too small: 30x8' 10
tmux -L "$sock" resize-window -t "$session" -x 100 -y 30
wait_for '100x30' 10
echo "ok: resizing re-lays the panes"

# --- q exits 0 and restores the terminal ---
keys q
wait_for '^EXIT=0' 20
[ "$(tmux -L "$sock" display-message -p -t "$session" '#{alternate_on}')" = 0 ] ||
  fail "the terminal is still in the alternate screen"
echo "ok: q exits 0, terminal restored"

# --- a FIFO where the run's log should be is an error on screen, not a hang ---
mkdir -p "$work/fifo-run"
mkfifo "$work/fifo-run/train_log.csv"
start fifo 140 20 "$forge" top --run "$work/fifo-run"
wait_for 'train_log.csv.*FIFO' 30
keys q
wait_for '^EXIT=0' 20
echo "ok: a FIFO as train_log.csv is reported, and q still quits"

# --- the run dashboard follows a training run as it writes ---
"$forge" train "${tiny[@]}" --out "$work/run" --steps 3000 --eval-interval 100 --log-interval 5 \
  --format json > "$work/train.log" 2>&1 &
train_pid=$!
start run 120 36 "$forge" top --run "$work/run"
wait_for 'step [0-9]+/' 120
first=$(screen | grep -oE 'step [0-9]+/' | head -1 | grep -oE '[0-9]+')
deadline=$((SECONDS + 120))
until [ "$(screen | grep -oE 'step [0-9]+/' | head -1 | grep -oE '[0-9]+')" -gt "$first" ]; do
  [ $SECONDS -lt $deadline ] || fail "the step did not advance past $first"
  sleep 0.3
done
s=$(screen)
loss=$(grep -oE 'loss [0-9]+\.[0-9]{4}' <<<"$s" | head -1 | cut -d' ' -f2)
step=$(grep -oE 'step [0-9]+/' <<<"$s" | head -1 | grep -oE '[0-9]+')
row=$(grep -E "^$step," "$work/run/train_log.csv") || fail "step $step is not in the log"
[ "$(printf '%.4f' "$(cut -d, -f3 <<<"$row")")" = "$loss" ] || fail "loss $loss is not step $step's ($row)"
echo "ok: the dashboard follows the run (step $first -> $step, loss $loss)"
kill "$train_pid"
wait "$train_pid" 2>/dev/null || true
train_pid=
keys q
wait_for '^EXIT=0' 20
echo "PASS"
