#!/usr/bin/env bash
# Round trip over every .tir file in the repository: for each file that `truenoc opt` accepts,
# `truenoc opt FILE | truenoc opt -` must print exactly what `truenoc opt FILE` printed.
# Files the parser or verifier reject (negative tests) are counted separately.
set -u
truenoc=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checked=0 rejected=0 differ=0
while IFS= read -r -d '' f; do
  if "$truenoc" opt "$f" > "$tmp/once" 2>/dev/null; then
    checked=$((checked + 1))
    if ! "$truenoc" opt - < "$tmp/once" > "$tmp/twice" 2> "$tmp/err" || ! cmp -s "$tmp/once" "$tmp/twice"; then
      differ=$((differ + 1))
      echo "DIFFERS: $f"
      diff "$tmp/once" "$tmp/twice" | head -20
      cat "$tmp/err"
    fi
  else
    rejected=$((rejected + 1))
  fi
done < <(find "$root" -name '*.tir' -not -path '*/build*' -not -path '*/.git/*' -print0 | sort -z)
echo "round trip: $checked files checked, $differ differ ($rejected rejected inputs skipped)"
[ "$differ" -eq 0 ]
