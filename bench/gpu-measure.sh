#!/usr/bin/env bash
# Gathers the GPU figures that bench/NOTES-models.md and the performance-model chapter ask for, in
# one device run, each step under its own time limit so that one slow step cannot lose the rest:
#
#   bench models --device cuda --json        -> models.json   (eager vs compiled, first call)
#   bench roofline --device cuda --json/svg  -> roofline.json, roofline-h100.svg
#   profile example on the naive block       -> profile.txt, trace.json
#   the profiler's tests (CUDA events)       -> profiler-test.txt
#   bench compiled (profiler cost per launch) -> compiled.txt
#   the naive block's first call, fresh then warm cache, by stage -> first-call-{cold,warm}.txt
#   bench regional --device cuda --json        -> regional.json
#
# usage: bench/gpu-measure.sh PACKED_DIR OUT_DIR
# PACKED_DIR holds release builds of `engine-bench`, the `profile` example and the `profiler` test binary.
# PyTorch's side is a separate run (torch.compile takes minutes):
#   python3 bench/torch/models.py --device cuda --json > OUT_DIR/torch-models.json
#   python3 bench/torch/regional.py --device cuda --json > OUT_DIR/torch-regional.json
set -u
bin=${1:?packed binaries directory}
out=${2:?output directory}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
# Errors as one message each, not a backtrace.
export RUST_BACKTRACE=0
step() {
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit}s)"
    timeout "$limit" "$@" > "$out/$name" 2> "$out/$name.err"
    echo "rc=$?"
    tail -n 3 "$out/$name.err"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt" 2>&1
# Each workload's first call runs twice more in new processes (cold and warm kernel cache).
step models.json 480 "$bin/engine-bench" models --device cuda --json
step roofline.json 150 "$bin/engine-bench" roofline --device cuda --json --svg "$out/roofline-h100.svg"
step profile.txt 60 "$bin/profile" --device cuda --trace "$out/trace.json"
step profiler-test.txt 60 "$bin"/profiler-* --nocapture
step compiled.txt 90 "$bin/engine-bench" compiled --device cuda
cache=$(mktemp -d)
step first-call-cold.txt 120 env ENGINE_LOGS=compile_time ENGINE_CACHE_DIR="$cache" \
  "$bin/engine-bench" models-first-call --device cuda --workload "block 4x128x512"
step first-call-warm.txt 60 env ENGINE_LOGS=compile_time ENGINE_CACHE_DIR="$cache" \
  "$bin/engine-bench" models-first-call --device cuda --workload "block 4x128x512"
rm -rf "$cache"
step regional.json 300 "$bin/engine-bench" regional --device cuda --json
