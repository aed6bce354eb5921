#!/usr/bin/env bash
# Checks that the tests still fail under each mutation of tests/mutants.tsv: small deliberate
# bugs (a comparison turned, a rule dropped), many of which once passed every test.
#   scripts/mutants.sh                 every mutant
#   scripts/mutants.sh squad           those whose line matches "squad"
#   BERTFT_MUTANTS=my.tsv scripts/mutants.sh   another list of the same form
# Each line of tests/mutants.tsv: source file, sed expression, test binary (build/tests/...),
# gtest filter, separated by tabs; '#' starts a comment. For each mutant the source is changed,
# the binary rebuilt and run with the filter, and the source put back (also on Ctrl-C), then the
# binary rebuilt again. "caught" is what we want; "SURVIVED" means the tests no longer see that
# bug; "no longer applies" means the source changed under the expression, or the mutant no longer
# builds (update the line). Do not edit tests/mutants.tsv while it runs.
# Needs a configured build/ (scripts/setup.sh) and a source file without uncommitted changes.
# Exits 1 when a mutant survived or no longer applies.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
list="${BERTFT_MUTANTS:-tests/mutants.tsv}"
pattern="${1:-}"
original=""
file=""
restore() {
  if [ -n "$file" ] && [ -n "$original" ]; then
    cp "$original" "$file" && touch "$file"
    rm -f "$original"
    original=""
  fi
}
trap 'restore; exit 130' INT TERM
trap restore EXIT

caught=0
failed=0
while IFS=$'\t' read -r file expression target filter; do
  [ -z "$file" ] || [ "${file:0:1}" = "#" ] && continue
  if [ -n "$pattern" ] && ! grep -q -- "$pattern" <<<"$file $expression $filter"; then continue; fi
  if [ ! -f "$file" ]; then
    echo "no longer applies (no such file): $file: $expression"
    failed=$((failed + 1))
    continue
  fi
  if ! git diff --quiet -- "$file"; then
    echo "$file has uncommitted changes: commit or stash them first" >&2
    exit 2
  fi
  original="$(mktemp)"
  cp "$file" "$original"
  sed -i "$expression" "$file"
  if cmp -s "$file" "$original"; then
    echo "no longer applies: $file: $expression"
    failed=$((failed + 1))
    restore
    continue
  fi
  if ! ninja -C build "$target" >/tmp/bertft-mutant-build.log 2>&1; then
    echo "no longer applies (does not build): $file: $expression"
    failed=$((failed + 1))
  elif timeout 900 "build/tests/$target" --gtest_filter="$filter" >/tmp/bertft-mutant-test.log 2>&1; then
    echo "SURVIVED: $file: $expression ($target --gtest_filter='$filter')"
    failed=$((failed + 1))
  else
    echo "caught: $file: $expression"
    caught=$((caught + 1))
  fi
  restore
  ninja -C build "$target" >/dev/null 2>&1
done <"$list"
echo "$caught caught, $failed survived or no longer apply"
[ "$failed" -eq 0 ]
