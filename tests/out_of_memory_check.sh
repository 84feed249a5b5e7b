#!/usr/bin/env bash
# out_of_memory_check.sh TWINPIPE CONFIG
# A config the loader accepts that needs more memory than the process may
# take (ulimit -v) ends in exit 1 and "out of memory", never an abort.
set -u
tp=$1; config=$2
if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
  echo "skipped: a sanitizer's shadow memory does not start under ulimit -v"; exit 77
fi
out=$( (ulimit -v 3000000 && "$tp" simulate "$config") 2>&1 )
code=$?
if [ "$code" = 1 ] && grep -q "twinpipe simulate: out of memory" <<<"$out"; then
  echo "$out" | tail -1; exit 0
fi
echo "exit code $code, expected 1 and 'twinpipe simulate: out of memory'"; echo "$out" | tail -5
exit 1
