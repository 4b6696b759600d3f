#!/usr/bin/env bash
# How many learners can share one GPU? Runs N graders at once on this machine's GPU, as N
# learners in a lab would, and checks that every one finishes with the same verdicts as a grader
# running alone, while speed checks take turns on the GPU's lock.
#
#   docker/lab-load-test.sh N PACK_DIR [PHASE]
#
# PACK_DIR is a pack of the reference solutions (`cargo grader pack --solutions --out PACK_DIR`);
# PHASE defaults to phase4, whose GPU speed check takes the lock. It needs bash and python3, no
# Rust. It prints one line per grader (exit code, wall time, verdict counts, time waited for the
# GPU, the speed checks' results: set SPEED_CHECKS=id1,id2 to name others) and a summary; it exits
# 1 when a grader did not finish or a verdict differs from the solo run's. The last line gives the
# slowest grader's wall time over the solo run's. There are two solo runs: the first fills the
# kernel caches the graders here share (on a fresh machine it compiles every kernel: 84-122 s of
# phase 5 on an H100, against 23 s warm), the second is the baseline, a learner re-checking a phase.
# LAB_DEADLINE=SECONDS stops each of the N graders after that long (reported as not finished), so
# that a run on a lent machine ends with a summary.
set -euo pipefail

usage() { echo "usage: $0 N PACK_DIR [PHASE]" >&2; exit 2; }
[ $# -ge 2 ] || usage
graders=$1
pack=$2
phase=${3:-phase4}
[[ $graders =~ ^[1-9][0-9]*$ ]] || usage
[ -x "$pack/grader" ] || { echo "$pack/grader not found: make a pack with \`cargo grader pack --solutions --out $pack\`" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed to summarise the results" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A lock directory of this test's own, so no other grader on the machine takes part; a shared
# kernel cache, as in the Docker image, so the graders compile each kernel once between them.
export GRADER_LOCK_DIR="$work/locks"
export ENGINE_CACHE_DIR="$work/kernel-cache"
# Each grader says how long each timed part held the lock, for the summary's per-check holds.
export GRADER_LOCK_LOG=1

# Runs grader $1 and records its JSON, its stderr (where lock waits are reported), exit code and
# wall time.
run_grader() {
  local name=$1 started ended code=0
  started=$(date +%s.%N)
  timeout "${2:-0}" "$pack/grader" check "$phase" --solutions --prebuilt "$pack" --json --learner "$name" \
    >"$work/$name.json" 2>"$work/$name.err" || code=$?
  ended=$(date +%s.%N)
  echo "$code $started $ended" >"$work/$name.status"
}

for solo in first solo; do
  echo "solo run ($solo: $([ "$solo" = first ] && echo "fills the kernel caches" || echo "the baseline verdicts and times"))..."
  run_grader "$solo"
  read -r code started ended <"$work/$solo.status"
  echo "solo run: exit $code after $(python3 -c "print(f'{$ended - $started:.1f}')") s"
done
echo "$graders graders at once..."
for i in $(seq 1 "$graders"); do
  run_grader "grader$i" "${LAB_DEADLINE:-0}" &
done
for _ in $(seq 1 "$graders"); do
  wait -n || true
  echo "  [$(date +%T)] a grader finished"
done

python3 - "$work" "$graders" "${SPEED_CHECKS:-pointwise_cuda_bandwidth}" <<'PY'
import json, re, sys
from pathlib import Path

work, graders = Path(sys.argv[1]), int(sys.argv[2])
# The checks whose results each line shows in full (every verdict is compared either way).
SPEED_CHECKS = sys.argv[3].split(",")

def load(name):
    code, started, ended = (work / f"{name}.status").read_text().split()
    err = (work / f"{name}.err").read_text()
    try:
        reports = json.loads((work / f"{name}.json").read_text())
    except ValueError:
        reports = None
    if isinstance(reports, dict):
        reports = [reports]
    waits = [float(w) for w in re.findall(r"after waiting ([0-9.]+)s", err)]
    holds = {}
    for seconds, check in re.findall(r"held GPU for ([0-9.]+)s; timing \S+ (\S+)", err):
        holds[check] = holds.get(check, 0.0) + float(seconds)
    return {"code": int(code), "wall": float(ended) - float(started), "reports": reports, "waits": waits,
            "holds": holds, "err": err}

def verdicts(run):
    return {(r["phase"], c["id"]): c["status"] for r in run["reports"] or [] for c in r["checks"]}

solo = load("solo")
expected = verdicts(solo)
if not expected:
    sys.exit(f"the solo run wrote no results:\n{solo['err']}")
speed = [c for c in expected if c[1] in SPEED_CHECKS]
# What the room waits for: the lock held by each check of a grader alone, longest first; N
# graders take turns through all of it.
holds = sorted(solo["holds"].items(), key=lambda kv: -kv[1])
print(f"the solo run held the GPU lock {sum(solo['holds'].values()):.1f}s of its {solo['wall']:.1f}s: "
      + ", ".join(f"{check} {seconds:.1f}s" for check, seconds in holds))
problems = []
print(f"{'grader':>10} {'exit':>4} {'wall s':>7} {'waited s':>8}  verdicts; speed check")
for name in ["solo"] + [f"grader{i}" for i in range(1, graders + 1)]:
    run = load(name)
    got = verdicts(run)
    counts = {}
    for status in got.values():
        counts[status] = counts.get(status, 0) + 1
    messages = {(r["phase"], c["id"]): c["message"] for r in run["reports"] or [] for c in r["checks"]}
    speed_text = "; ".join(f"{got.get(c, 'missing')}: {messages.get(c, '')}" for c in speed)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"{name:>10} {run['code']:>4} {run['wall']:>7.1f} {sum(run['waits']):>8.1f}  {summary}; {speed_text}")
    if run["reports"] is None:
        problems.append(f"{name} did not finish (exit {run['code']}): {run['err'][-500:]}")
    elif got != expected:
        changed = sorted(
            f"{p}/{i}: {expected.get((p, i))} -> {s}: {messages.get((p, i), '')[:400]}"
            for (p, i), s in got.items()
            if expected.get((p, i)) != s
        )
        problems.append(f"{name}: verdicts differ from the solo run:\n    " + "\n    ".join(changed))

runs = [load(f"grader{i}") for i in range(1, graders + 1)]
walls = sorted(r["wall"] for r in runs)
waits = sorted(sum(r["waits"]) for r in runs)
first = load("first")
print(f"\n{graders} graders: wall {walls[0]:.1f}-{walls[-1]:.1f}s (solo {solo['wall']:.1f}s, the first solo run "
      f"{first['wall']:.1f}s), GPU lock waits {waits[0]:.1f}-{waits[-1]:.1f}s, median {waits[len(waits) // 2]:.1f}s; "
      f"the slowest took {walls[-1] / solo['wall']:.2f}x the solo run ({walls[-1] / first['wall']:.2f}x the first)")
if problems:
    print("\nPROBLEMS:\n  " + "\n  ".join(problems))
    sys.exit(1)
print("every grader finished with the solo run's verdicts")
PY
