#!/usr/bin/env bash
# scripts/generate.sh's defaults, checked without setting up or building: each default is added
# only when its own flag is absent.
#   tests/scripts/generate_args_test.sh [path/to/scripts/generate.sh]
set -euo pipefail
script="${1:-$(dirname "$0")/../../scripts/generate.sh}"
# shellcheck disable=SC1090  # the path is an argument
source "$script"
failures=0
expect() {
  local want="$1"
  shift
  with_defaults "$@"
  # shellcheck disable=SC2154  # with_defaults sets args
  local got="${args[*]}"
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: generate.sh $*"
    echo "  want: $want"
    echo "  got:  $got"
    failures=$((failures + 1))
  fi
}
expect "--prompt Mr. Speaker,  --max-tokens 300 --temperature 0.8 --top-k 40 --sliding-window"
# One flag given keeps every other default (--sliding-window among them).
expect "--max-tokens 50 --prompt Mr. Speaker,  --temperature 0.8 --top-k 40 --sliding-window" \
  --max-tokens 50
expect "--prompt ROMAN: --max-tokens 200 --temperature 0.8 --top-k 40 --sliding-window" \
  --prompt "ROMAN:" --max-tokens 200
expect "--prompt-ids 1,2 --greedy --max-tokens 300 --sliding-window" --prompt-ids 1,2 --greedy
expect "--top-p=0.9 --temperature=1 --prompt Mr. Speaker,  --max-tokens 300 --sliding-window" \
  --top-p=0.9 --temperature=1
expect "--sliding-window --max-tokens 5 --prompt Mr. Speaker,  --temperature 0.8 --top-k 40" \
  --sliding-window --max-tokens 5
# A value that merely contains a flag's name is not that flag.
expect "--prompt say --greedy now --max-tokens 300 --temperature 0.8 --top-k 40 --sliding-window" \
  --prompt "say --greedy now"
[[ $failures -eq 0 ]] && echo "generate.sh defaults: all cases pass"
exit "$failures"
