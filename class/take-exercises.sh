#!/usr/bin/env bash
# Puts a learner's work into a clean copy of the workbook, as `grader regrade` does: only the
# `.rs` files under each exercises/*/src of LEARNER travel into WORKBOOK (whose own exercise
# sources are removed first), so nothing else the learner changed (the grader, the solutions, the
# checks, Cargo files) reaches the grading.
#
# Usage: class/take-exercises.sh LEARNER_CHECKOUT WORKBOOK_COPY
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 LEARNER_CHECKOUT WORKBOOK_COPY" >&2
  exit 2
fi
learner=$1
workbook=$2
found=0
for src in "$workbook"/exercises/*/src; do
  crate=$(basename "$(dirname "$src")")
  from="$learner/exercises/$crate/src"
  if [ ! -d "$from" ]; then
    echo "$learner has no exercises/$crate/src: is it a checkout of this workbook?" >&2
    exit 1
  fi
  rm -rf "$src"
  mkdir -p "$src"
  (cd "$from" && find . -type f -name '*.rs' -print0) | while IFS= read -r -d '' file; do
    mkdir -p "$src/$(dirname "$file")"
    cp "$from/$file" "$src/$file"
  done
  found=$((found + 1))
done
echo "took the exercise sources of $found crates from $learner"
