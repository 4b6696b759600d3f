#!/usr/bin/env bash
# Re-grades a class on a Slurm cluster: one array task per learner (class/slurm/regrade.sbatch,
# at most PARALLEL at a time), then, once all have ended, `grader rollup` of their results into
# RESULTS/class.csv. Run it from the workbook's root on a login node; the workbook's last commit
# is the clean copy every learner is graded in.
#
# Usage: class/slurm/submit.sh LEARNERS RESULTS [PARALLEL]
#   LEARNERS  a file with one learner checkout's path per line
#   RESULTS   where the results and class.csv go
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 LEARNERS RESULTS [PARALLEL]" >&2
  exit 2
fi
learners=$1
results=$2
parallel=${3:-8}
count=$(grep -c . "$learners")
if [ "$count" -eq 0 ]; then
  echo "$learners lists no learner" >&2
  exit 1
fi
mkdir -p "$results"
array=$(sbatch --parsable --array="0-$((count - 1))%$parallel" class/slurm/regrade.sbatch "$learners" "$results")
rollup=$(sbatch --parsable --dependency="afterany:$array" --job-name=workbook-rollup \
  --output="$results/rollup-%j.log" --wrap="cargo grader rollup '$results' --csv '$results/class.csv'")
echo "queued: $count learners as job array $array (at most $parallel at once), then the roll-up as job $rollup"
echo "the class table will be in $results/class.csv and $results/rollup-$rollup.log"
