#!/usr/bin/env bash
# The README's main command: set up, build the CLI, and generate with the shipped model on the
# best backend available (WebGPU when a real GPU adapter exists, else the CPU).
#   scripts/generate.sh [forge generate flags]     e.g. --prompt "ROMAN:" --max-tokens 200
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh" >&2
FORGE_BUILD_TARGETS=forge_cli bash "$root/scripts/build.sh" >&2
build="${FORGE_BUILD_DIR:-$root/build}"
# Defaults for the shipped model, each added only when its flag is absent: flags given win.
has() { case " $args " in *" $1 "* | *" $1="*) return 0 ;; esac; return 1; }
args="$*"
has --prompt || has --prompt-ids || set -- "$@" --prompt "Mr. Speaker, "
has --max-tokens || set -- "$@" --max-tokens 300
if ! has --greedy; then
  has --temperature || set -- "$@" --temperature 0.8
  has --top-k || has --top-p || set -- "$@" --top-k 40
fi
has --sliding-window || set -- "$@" --sliding-window
exec "$build/forge" generate --backend auto "$@"
