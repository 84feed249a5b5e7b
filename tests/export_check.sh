#!/usr/bin/env bash
# export_check.sh TWINPIPE SRC
# Every name `twinpipe export` writes is one the framework's source defines:
# exports the examples, the Korthikanti et al. configs, every H100 run of
# traces/published/h100-dgx-cloud and moe-dgx-cloud and tests/inputs/export's configs to
# Megatron-LM and torchtitan, and holds each flag (megatron) or section.key
# (torchtitan) against tests/inputs/export/{megatron_arguments,torchtitan_keys}.txt,
# and the schedule torchtitan is told to build against the names torch's
# get_schedule_class takes (torch_schedule_names.txt).
# A config an export refuses must exit 2 naming a JSON path.
set -u
TP=$1; SRC=$2
LISTS=$SRC/tests/inputs/export
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
configs=("$SRC"/examples/*.json "$SRC"/traces/published/korthikanti2022/*.json "$LISTS"/*.json)
i=0
while IFS= read -r line; do
  i=$((i + 1))
  python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])["config"]))' "$line" > "$work/h100_$i.json"
  configs+=("$work/h100_$i.json")
done < <(cat "$SRC/traces/published/h100-dgx-cloud/runs.jsonl" "$SRC/traces/published/moe-dgx-cloud/runs.jsonl")

fail=0; exported=0; refused=0; names=0
for c in "${configs[@]}"; do
  for fw in megatron torchtitan; do
    "$TP" export "$fw" "$c" > "$work/out" 2> "$work/err"; code=$?
    if [ $code = 2 ]; then
      if ! grep -qE ': /[a-z_]+/[a-z_]+' "$work/err"; then
        echo "$fw $c: exit 2 without a JSON path: $(cat "$work/err")"; fail=1
      fi
      refused=$((refused + 1)); continue
    elif [ $code != 0 ]; then
      echo "$fw $c: exit $code: $(cat "$work/err")"; fail=1; continue
    fi
    exported=$((exported + 1))
    if [ $fw = megatron ]; then
      grep -v '^#' "$work/out" | sed -E 's/^(--[a-z0-9-]+).*/\1/' > "$work/names"
      list=$LISTS/megatron_arguments.txt
    else
      awk '/^\[/ { gsub(/[][]/, ""); section = $0; next } /^[a-z_0-9]+ = / { print section "." $1 }' \
        "$work/out" > "$work/names"
      list=$LISTS/torchtitan_keys.txt
    fi
    if [ $fw = torchtitan ]; then
      schedule=$(sed -nE 's/^pipeline_parallel_schedule = "(.*)"$/\1/p' "$work/out")
      if [ -n "$schedule" ]; then
        names=$((names + 1))
        grep -v '^#' "$LISTS/torch_schedule_names.txt" | grep -qixF -- "$schedule" ||
          { echo "$fw $c: schedule '$schedule' is not in torch_schedule_names.txt"; fail=1; }
      fi
    fi
    while IFS= read -r n; do
      names=$((names + 1))
      grep -qxF -- "$n" "$list" || { echo "$fw $c: '$n' is not in $(basename "$list")"; fail=1; }
    done < "$work/names"
  done
done
echo "$exported exports ($names names checked), $refused refused with a JSON path"
[ $exported -ge 90 ] || { echo "too few exports: $exported"; fail=1; }
exit $fail
