#!/usr/bin/env bash
# The CPU side of issue 14 on a machine with many cores and PyTorch (the GPU machine's host): the
# engine's `bench models --device cpu` and PyTorch's `bench/torch/models.py --device cpu`, taken
# in turns so that both see the host in the same state, then one table of all of them.
#
# usage: bench/cpu-host.sh OUT_DIR ROUNDS LABEL=BENCH_BINARY[,VAR=VALUE...] ...
#
# Each round runs every engine binary, then PyTorch (ROUNDS=0: the engine binaries once, no
# PyTorch). Settings after a binary are set in its environment, as in
# `threads8=.gpu/bin/engine-bench,ENGINE_NUM_THREADS=8`. Writes OUT_DIR/host.txt (the CPU, PyTorch's
# threads and build), one JSON report per run, and prints the table last.
set -u
out=${1:?output directory}
rounds=${2:?rounds}
shift 2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export RUST_BACKTRACE=0
{
    lscpu
    echo
    python3 -c 'import torch; print("torch", torch.__version__, "threads", torch.get_num_threads()); print(torch.__config__.parallel_info()); print(torch.__config__.show())'
} > "$out/host.txt" 2>&1
grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|L2|L3|Flags)' "$out/host.txt" | cut -c1-200

engine_run() {
    local spec=$1 tag=$2
    local name=${spec%%=*}
    local settings
    IFS=, read -r -a settings <<< "${spec#*=}"
    local binary=${settings[0]}
    echo "== engine $name ($tag) ${settings[*]:1}"
    env "${settings[@]:1}" timeout 300 "$binary" models --device cpu --json \
        > "$out/engine-$name-$tag.json" 2> "$out/engine-$name-$tag.err"
    echo "rc=$?"
}

torch_run() {
    local tag=$1
    echo "== torch ($tag)"
    PYTHONUNBUFFERED=1 timeout 420 python3 "$here/torch/models.py" --device cpu --json > "$out/torch-$tag.json" 2> "$out/torch-$tag.err"
    echo "rc=$?"
}

if [[ $rounds == 0 ]]; then
    for spec in "$@"; do engine_run "$spec" r1; done
else
    for round in $(seq 1 "$rounds"); do
        for spec in "$@"; do engine_run "$spec" "r$round"; done
        torch_run "r$round"
    done
fi

python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
columns, rows = [], {}
for path in sorted(glob.glob(f"{out}/*.json")):
    name = os.path.basename(path)[:-5]
    try:
        report = json.load(open(path))
    except ValueError:
        continue
    torch = name.startswith("torch")
    for key, label in ((("eager_ms", "eager"), ("compiled_ms", "compiled"))):
        column = f"{name} {label}"
        columns.append(column)
        for r in report["rows"]:
            rows.setdefault(r["workload"], {})[column] = r[key]
print("ms, median of each run")
print(" | ".join(["workload"] + columns))
for workload, values in rows.items():
    print(" | ".join([workload] + [f"{values[c]:.3f}" if c in values else "-" for c in columns]))
PY
