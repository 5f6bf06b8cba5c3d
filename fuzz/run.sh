#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan, in build-fuzz/ or $FORGE_FUZZ_BUILD_DIR)
# and runs each for SECONDS, or until RUNS executions when given, from its committed seed corpus
# (fuzz/corpus/NAME) and dictionary (fuzz/dict/NAME.dict). Prints executions and coverage per
# harness; exits non-zero if any harness crashed, leaked, timed out or broke an invariant (the
# input is saved under build-fuzz/artifacts/). New inputs go to build-fuzz/corpus/NAME, so
# later runs start from what earlier ones found.
#   fuzz/run.sh SECONDS [RUNS] [NAME...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:?usage: fuzz/run.sh SECONDS [RUNS] [NAME...]}
runs=${2:--1}
shift $(($# < 2 ? $# : 2))
build="${FORGE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(safetensors compact config vocab bpe char serve_resolve http_request)
targets=$(printf 'fuzz_%s ' "${names[@]}")

# Only the harnesses are built; scripts/sanitize.sh shares its build (tests included) this way.
# FORGE_FUZZ_PREBUILT=1 skips the build (harnesses carried to a machine without a compiler).
if [ "${FORGE_FUZZ_PREBUILT:-0}" = 0 ]; then
  CXX=clang++ FORGE_BUILD_DIR="$build" FORGE_BUILD_TARGETS="$targets" \
    bash "$root/scripts/build.sh" -DFORGE_BUILD_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi

mkdir -p "$build/artifacts"
# One harness; its exit status goes to fuzz_NAME.rc beside its log.
run_one() {
  local name=$1 dict=() rc=0
  mkdir -p "$build/corpus/$name"
  [ -f "$root/fuzz/dict/$name.dict" ] && dict=("-dict=$root/fuzz/dict/$name.dict")
  # detect_leaks: a parser that leaks on a refused input fails too.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 "$build/fuzz/fuzz_$name" \
    -max_total_time="$seconds" -runs="$runs" -timeout=25 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" "${dict[@]}" \
    "$build/corpus/$name" "$root/fuzz/corpus/$name" >"$build/fuzz_$name.log" 2>&1 || rc=$?
  echo "$rc" >"$build/fuzz_$name.rc"
}
# FORGE_FUZZ_PARALLEL=1 runs every harness at once (a machine with a core for each).
for name in "${names[@]}"; do
  if [ "${FORGE_FUZZ_PARALLEL:-0}" = 0 ]; then run_one "$name"; else run_one "$name" & fi
done
wait
failed=()
printf '%-14s %12s %8s %8s %s\n' harness executions cov ft result
for name in "${names[@]}"; do
  log="$build/fuzz_$name.log"
  rc=$(cat "$build/fuzz_$name.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  stats=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$stats")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$stats")
  result=ok
  if [ "$rc" -ne 0 ]; then
    result="FAILED (exit $rc, log $log)"
    failed+=("$name")
  fi
  printf '%-14s %12s %8s %8s %s\n' "$name" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  for name in "${failed[@]}"; do
    echo "--- fuzz_$name"
    grep -E 'ERROR|invariant failed|runtime error|Test unit written|SUMMARY' "$build/fuzz_$name.log" | head -20
  done
  exit 1
fi
