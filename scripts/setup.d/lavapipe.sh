#!/usr/bin/env bash
# Vulkan for GPU-less machines: Mesa 25's lavapipe from bookworm-backports, plus the Vulkan loader.
# Debian 12's own lavapipe (Mesa 22.3) is rejected by the pinned Dawn, which then silently hands
# out its Null adapter, so the backports build is required. Idempotent. Usage: lavapipe.sh <root>
#
# It also unpacks the loader (libvulkan1) into third_party/vulkan so it can be carried to a
# machine that has a GPU driver but no loader (the runtime preloads it from there).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
installed() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

# The archive URI the machine already uses for bookworm (deb822 or one-line sources); no host
# name is written into the repo.
archive_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    awk 'BEGIN{RS=""; FS="\n"}
         { uri=""; ok=0
           for (i=1;i<=NF;i++) {
             if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uri=a[2] }
             if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok=1 }
           if (ok && uri != "") { print uri; exit } }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    awk '$1=="deb" { for (i=2;i<=NF;i++) if ($i !~ /^\[/ && $i !~ /=/ && $i !~ /\]$/) {
           if ($(i+1)=="bookworm") { print $i; exit } else break } }' "$f"
  done
}

mesa=$(installed mesa-vulkan-drivers)
if ! dpkg --compare-versions "${mesa:-0}" ge 25 || [ -z "$(installed libvulkan1)" ]; then
  list=/etc/apt/sources.list.d/forge-bookworm-backports.sources
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    uri=$(archive_uri | head -n1)
    [ -n "$uri" ] || { echo "lavapipe: no apt source names bookworm; add bookworm-backports by hand" >&2; exit 1; }
    echo "lavapipe: adding bookworm-backports from $uri"
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$uri" | as_root tee "$list" >/dev/null
  fi
  as_root apt-get update -q
  echo "lavapipe: installing mesa-vulkan-drivers (bookworm-backports) and libvulkan1"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -t bookworm-backports mesa-vulkan-drivers libvulkan1
fi

# A carryable copy of the loader.
vk="$root/third_party/vulkan"
if [ ! -e "$vk/lib/libvulkan.so.1" ]; then
  tmp=$(mktemp -d) && chmod 755 "$tmp"  # apt downloads as _apt
  (cd "$tmp" && apt-get download -q libvulkan1 >/dev/null && dpkg -x ./libvulkan1_*.deb x)
  mkdir -p "$vk/lib"
  cp -L "$tmp"/x/usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$vk/lib/libvulkan.so.1"
  rm -rf "$tmp"
fi
