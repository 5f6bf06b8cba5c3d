#!/usr/bin/env bash
# The README's main command: set up, build the CLI, and generate with the shipped model on the
# best backend available (WebGPU when a real GPU adapter exists, else the CPU).
#   scripts/generate.sh [forge generate flags]     e.g. --prompt "ROMAN:" --max-tokens 200
set -euo pipefail

# Sets `args` to the given flags plus the shipped model's defaults, each default added only when
# its flag was not given (so flags given win, one by one). Sourcing this script defines only this
# (tests/scripts/generate_args_test.sh).
with_defaults() {
  local given=("$@")
  has() {
    local a
    for a in "${given[@]}"; do
      case $a in "$1" | "$1="*) return 0 ;; esac
    done
    return 1
  }
  args=("$@")
  has --prompt || has --prompt-ids || args+=(--prompt "Mr. Speaker, ")
  has --max-tokens || args+=(--max-tokens 300)
  if ! has --greedy; then
    has --temperature || args+=(--temperature 0.8)
    has --top-k || has --top-p || args+=(--top-k 40)
  fi
  has --sliding-window || args+=(--sliding-window)
}
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0

root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh" >&2
FORGE_BUILD_TARGETS=forge_cli bash "$root/scripts/build.sh" >&2
build="${FORGE_BUILD_DIR:-$root/build}"
with_defaults "$@"
exec "$build/forge" generate --backend auto "${args[@]}"
