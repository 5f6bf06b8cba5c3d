#!/usr/bin/env bash
# The README's main command: set up, build the CLI, and generate with the shipped model on the
# best backend available (WebGPU when a real GPU adapter exists, else the CPU).
#   scripts/generate.sh [forge generate flags]     e.g. --prompt "ROMAN:" --max-tokens 200
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh" >&2
FORGE_BUILD_TARGETS=forge_cli bash "$root/scripts/build.sh" >&2
build="${FORGE_BUILD_DIR:-$root/build}"
# Defaults for the shipped model; flags given on the command line win.
case " $* " in
  *" --prompt "* | *" --prompt="* | *" --prompt-ids "* | *" --prompt-ids="*) ;;
  *) set -- --prompt "Mr. Speaker, " "$@" ;;
esac
if [ $# -eq 2 ]; then
  set -- "$@" --max-tokens 300 --temperature 0.8 --top-k 40 --sliding-window
fi
exec "$build/forge" generate --backend auto "$@"
