#!/usr/bin/env bash
# fidelity_judge_test.sh: the verdicts of fidelity_check.sh's judge() on
# made-up `compare --summary` lines, so that the loop's check cannot turn
# into one that always skips or always passes. Each case: the prediction's,
# the repeat's and the profile's line against the measured run, and the exit
# code judge() must give (0 within, 1 a miss, 3 not judged).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
max_step=5; max_bubble=0.03; max_memory=5
eval "$(sed -n '/^judge() {/,/^}/p' "$here/fidelity_check.sh")"
declare -F judge > /dev/null || { echo "judge() not found in fidelity_check.sh"; exit 1; }
# Fields: step predicted, measured (ms), error; bubble predicted, measured;
# peak memory predicted, measured (MiB), error.
line() { printf '%10s %10s %8s %8s %8s %10s %10s %8s' 20.0 20.5 "$1" 0.10 "$2" 7.5 7.6 "$3"; }
quiet=$(line -1.0% 0.11 +0.0%)
failures=0
case_() {  # case_ NAME EXPECTED PREDICTION REPEAT PROFILE
  local code=0 verdict
  verdict=$(judge "$3" "$4" "$5") || code=$?
  if [ "$code" != "$2" ]; then
    echo "FAIL $1: exit $code, expected $2 ($verdict)"; failures=$((failures + 1))
  else
    echo "ok   $1: $verdict"
  fi
}
case_ "within the bound"                 0 "$(line -4.0% 0.12 -1.9%)" "$quiet" "$quiet"
case_ "step time off, machine quiet"     1 "$(line -12.0% 0.12 -1.9%)" "$quiet" "$quiet"
case_ "positive error read as a number"  1 "$(line +12.1% 0.12 -1.9%)" "$quiet" "$quiet"
case_ "bubble off, machine quiet"        1 "$(line -1.0% 0.20 -1.9%)" "$quiet" "$quiet"
case_ "peak memory off, machine quiet"   1 "$(line -1.0% 0.12 +15.1%)" "$quiet" "$quiet"
case_ "within bound plus the noise"      0 "$(line -8.0% 0.12 -1.9%)" "$(line -4.0% 0.11 +0.0%)" "$quiet"
case_ "beyond bound plus the noise"      1 "$(line -9.5% 0.12 -1.9%)" "$(line -4.0% 0.11 +0.0%)" "$quiet"
case_ "noisy repeat: not judged"         3 "$(line -23.0% 0.12 -1.9%)" "$(line +11.3% 0.11 +0.0%)" "$quiet"
case_ "noisy profile: not judged"        3 "$(line +20.9% 0.12 -1.9%)" "$quiet" "$(line -20.0% 0.11 +0.0%)"
case_ "noisy bubble: not judged"         3 "$(line -1.0% 0.12 -1.9%)" "$(line -1.0% 0.16 +0.0%)" "$quiet"
case_ "unreadable prediction"            1 "$(line nan 0.12 -1.9%)" "$quiet" "$quiet"
case_ "unreadable profile"               1 "$(line -1.0% 0.12 -1.9%)" "$quiet" "$(line inf 0.11 +0.0%)"
case_ "a line missing"                   1 "$(line -1.0% 0.12 -1.9%)" "$quiet" ""

# The verdict on a schedule from its attempts' counts: outcome PASSED JUDGED.
attempts=12
eval "$(sed -n '/^min_judged=/p; /^outcome() {/,/^}/p' "$here/fidelity_check.sh")"
declare -F outcome > /dev/null || { echo "outcome() not found in fidelity_check.sh"; exit 1; }
outcome_() {  # outcome_ NAME EXPECTED PASSED JUDGED
  local code=0 said
  said=$(outcome 1f1b "$3" "$4") || code=$?
  if [ "$code" != "$2" ]; then
    echo "FAIL $1: exit $code, expected $2 ($said)"; failures=$((failures + 1))
  else
    echo "ok   $1: ${said:-passes}"
  fi
}
outcome_ "an attempt within"                 0 1 5
outcome_ "within after two misses"           0 1 2
outcome_ "no attempt judged: skip"          77 0 0
outcome_ "one judged miss is too few: skip" 77 0 1
outcome_ "two judged misses are too few"    77 0 2
outcome_ "three judged misses fail"          1 0 3
outcome_ "twelve judged misses fail"         1 0 12
[ $failures = 0 ] || { echo "$failures cases failed"; exit 1; }
