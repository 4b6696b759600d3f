#!/usr/bin/env bash
# Downloads the newest grading results of every learner's repository on GitHub, for `grader
# rollup`: the `grade-cpu` and `grade-gpu` artifacts of the last `grade` run (class/github/grade.yml)
# of each repository named in REPOS (one owner/name per line), into RESULTS/<name>/.
# Needs the GitHub CLI (`gh`), logged in with read access to the repositories.
#
# Usage: class/github/collect.sh REPOS RESULTS, then: cargo grader rollup RESULTS --csv class.csv
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 REPOS RESULTS" >&2
  exit 2
fi
repos=$1
results=$2
while IFS= read -r repo; do
  [ -n "$repo" ] || continue
  run=$(gh run list --repo "$repo" --workflow grade --limit 1 --json databaseId --jq '.[0].databaseId')
  if [ -z "$run" ]; then
    echo "$repo: no grade run yet" >&2
    continue
  fi
  dir="$results/${repo#*/}"
  rm -rf "$dir"
  mkdir -p "$dir"
  gh run download "$run" --repo "$repo" --dir "$dir"
  echo "$repo: run $run -> $dir"
done < "$repos"
