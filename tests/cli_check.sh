#!/usr/bin/env bash
# cli_check.sh EXIT_CODE EXPECT COMMAND...
# Runs COMMAND and checks its exit code; EXPECT is either "file:PATH" (stdout
# must equal that file byte for byte) or a text that stdout+stderr must contain.
set -u
want_code=$1; expect=$2; shift 2
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
code=$?
ok=1
if [ "$code" != "$want_code" ]; then
  echo "exit code $code, expected $want_code"; ok=0
fi
if [[ "$expect" == file:* ]]; then
  if ! diff -u "${expect#file:}" "$out" | head -40; then :; fi
  cmp -s "${expect#file:}" "$out" || { echo "stdout differs from ${expect#file:}"; ok=0; }
elif ! grep -qF -- "$expect" "$out" "$err"; then
  echo "output does not contain: $expect"; ok=0
fi
if [ $ok = 0 ]; then
  echo "--- command: $*"; echo "--- stdout:"; head -c 4000 "$out"; echo "--- stderr:"; head -c 4000 "$err"
  exit 1
fi
exit 0
