# recorded.sh: sourced by the published checks. same_as_recorded WHAT
# RECORDED NOW: NOW must equal the committed RECORDED byte for byte (a change
# to the model that moves it re-records it with scripts/record_published.sh
# and says why in traces/published/README.md); otherwise print the first
# lines of the difference and exit 1.
same_as_recorded() {
  local status=0
  diff "$2" "$3" > "$3.diff" 2>&1 || status=$?
  if [[ $status -eq 1 ]]; then
    echo "the $1 differs from $2 (recorded < > now):"
    head -40 "$3.diff"; exit 1
  elif [[ $status -ne 0 ]]; then
    echo "the $1 could not be compared with $2:"; cat "$3.diff"; exit 1
  fi
}
