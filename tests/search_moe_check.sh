#!/usr/bin/env bash
# search_moe_check.sh TWINPIPE CONFIG OUT: the search over a mixture of
# experts names the expert-parallel degree of its best plan (e > 1, a
# divisor of the experts), writes that degree into the config -o gives, and
# simulate runs that config.
set -euo pipefail
tp=$1; config=$2; out=$3
table=$("$tp" search "$config" -o "$out")
e=$(sed -n 's/^best for throughput: e=\([0-9]*\) .*/\1/p' <<< "$table")
experts=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["experts"])' "$config")
if [[ -z "$e" || "$e" -le 1 || $((experts % e)) -ne 0 ]]; then
  echo "expected a best plan with e > 1 dividing $experts experts, got '${e}':"; echo "$table"; exit 1
fi
grep -q "\"expert_parallel\": $e" "$out" || { echo "$out does not name expert_parallel $e"; exit 1; }
"$tp" simulate "$out"
