#!/usr/bin/env bash
# Runs a check over the examples and every lit input of the pass folders.
#   each-input.sh idempotence TRUENOC SRCROOT
#     for each file -O2 accepts: `opt -O2 X | opt -O2 -` prints exactly `opt -O2 X`; for every
#     parseable file: `opt -O2 --verify-each X` never reports invalid IR after a pass.
#   each-input.sh ptxas TRUENOC SRCROOT PTXAS...
#     for each file -O2 accepts: its -O2 output, emitted for sm_80 and sm_90 (a module targeting
#     sm_89: for sm_89 and sm_90; sm_90a: for sm_90a), assembles.
set -u
mode=$1 truenoc=$2 root=$3
shift 3
dirs=(examples lit-tests/fma-fusion lit-tests/dce lit-tests/const-fold lit-tests/cse lit-tests/strength-reduce
      lit-tests/barrier-safety lit-tests/tile-validation lit-tests/register-liveness lit-tests/pipeline)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checked=0 rejected=0 bad=0 verified=0
for d in "${dirs[@]}"; do
  for f in "$root/$d"/*.tir; do
    [ -e "$f" ] || continue
    rel=${f#"$root"/}
    "$truenoc" opt "$f" > /dev/null 2>&1 || continue  # not a valid module (parser/verifier tests)
    if [ "$mode" = idempotence ]; then
      "$truenoc" opt -O2 --verify-each "$f" > /dev/null 2> "$tmp/err"
      if grep -q "invalid after pass" "$tmp/err"; then
        bad=$((bad + 1)); echo "VERIFY FAILED: $rel"; cat "$tmp/err"
      else
        verified=$((verified + 1))
      fi
    fi
    if ! "$truenoc" opt -O2 "$f" > "$tmp/once" 2> /dev/null; then
      rejected=$((rejected + 1))
      continue
    fi
    checked=$((checked + 1))
    if [ "$mode" = idempotence ]; then
      if ! "$truenoc" opt -O2 - < "$tmp/once" > "$tmp/twice" 2> "$tmp/err" || ! cmp -s "$tmp/once" "$tmp/twice"; then
        bad=$((bad + 1)); echo "NOT A FIXED POINT: $rel"; diff "$tmp/once" "$tmp/twice" | head -20; cat "$tmp/err"
      fi
    else
      sms="sm_80 sm_90"
      grep -q '^target sm_89$' "$tmp/once" && sms="sm_89 sm_90"  # fp8 ops: sm_89 and newer
      grep -q '^target sm_90a$' "$tmp/once" && sms=sm_90a  # arch-specific ops (wgmma): sm_90a only
      for sm in $sms; do
        if ! "$truenoc" emit-ptx - --target "$sm" < "$tmp/once" > "$tmp/ptx" 2> "$tmp/err" ||
           ! "$@" "-arch=$sm" < "$tmp/ptx" > /dev/null 2>> "$tmp/err"; then
          bad=$((bad + 1)); echo "REJECTED for $sm: $rel"; head -5 "$tmp/err"
        fi
      done
    fi
  done
done
if [ "$mode" = idempotence ]; then
  echo "-O2 fixed point: $checked files checked, $verified verified after each pass, $bad failures ($rejected rejected by -O2)"
else
  echo "ptxas: $checked -O2 outputs assembled for sm_80 and sm_90, $bad failures ($rejected rejected by -O2)"
fi
[ "$bad" -eq 0 ]
