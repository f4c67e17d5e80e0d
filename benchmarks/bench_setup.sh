#!/usr/bin/env bash
# The set-up's time on fresh clones: for each commit given (default: HEAD), `git clone` of this repository into a
# temporary folder, then `make venv wordnet` and `make models MODEL_SET=...` timed, with pip's and uv's caches
# pointed at new empty folders (cold; WARM=1 with BENCH_DIR=... keeps them in BENCH_DIR across runs: a second run is
# warm). Prints one line per step with the load average before it, and writes each venv's `pip freeze --all`
# beside the clones. Run the commits back to back, nothing else of ours running: on a shared 2-core CPU every number
# grows. Usage: bash benchmarks/bench_setup.sh [COMMIT ...]   (BENCH_DIR=... keeps the clones; default: removed)
set -euo pipefail
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
models=${MODEL_SET:-"smollm2-135m-instruct minilm-l6 qwen2.5-coder-0.5b-instruct"}
keep=${BENCH_DIR:+1}
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
[ $# -gt 0 ] || set -- HEAD
export BIAS_DATA_MIRROR=${BIAS_DATA_MIRROR:-$repo/../shared/data}

timed() {  # label, command...
  local load t0 t1
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s.%N)
  "${@:2}" >"$dir/$1.log" 2>&1 || { echo "$1 failed: see $dir/$1.log" >&2; tail -20 "$dir/$1.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  printf '%-40s %7.1f s   (load average before: %s)\n' "$1" "$(echo "$t1 - $t0" | bc)" "$load"
}

for rev in "$@"; do
  sha=$(git -C "$repo" rev-parse --short "$rev")
  clone="$dir/clone-$sha"
  rm -rf "$clone"
  git clone -q "$repo" "$clone" && git -C "$clone" checkout -q "$sha"
  if [ -n "${WARM:-}" ]; then
    export PIP_CACHE_DIR="$dir/pip-cache" UV_CACHE_DIR="$dir/uv-cache"
  else
    export PIP_CACHE_DIR="$clone.pip-cache" UV_CACHE_DIR="$clone.uv-cache"
    rm -rf "$PIP_CACHE_DIR" "$UV_CACHE_DIR"
  fi
  timed "$sha make venv wordnet" make -C "$clone" venv wordnet
  timed "$sha make models" make -C "$clone" models MODEL_SET="$models"
  "$clone/.venv/bin/python" -m pip freeze --all --disable-pip-version-check 2>/dev/null > "$dir/freeze-$sha.txt"
  du -sh "$clone/.venv" | sed "s|$dir/||"
done
echo "clones, logs and freezes in $dir"
[ -n "$keep" ] || [ -n "${KEEP:-}" ] || rm -rf "$dir"/clone-*
