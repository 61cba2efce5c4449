#!/usr/bin/env bash
# The CPU of each test of a list, every process it started counted (a cpuacct cgroup, v1,
# as root). Usage: bench/test_cpu.sh IDS_FILE OUT_JSONL [WORKERS]
#   IDS_FILE: test ids, one per line (e.g. from `pytest --collect-only -q`); WORKERS 0 (the
#   default): one test at a time, each test's figure its own. Prints the unit's total.
set -euo pipefail
ids=$1; out=$2; workers=${3:-0}
cd "$(dirname "$0")/.."
cg=/sys/fs/cgroup/cpuacct/topo_test_cpu_$$
mkdir -p "$cg"; echo $$ > "$cg/tasks"
if [ "$workers" = 0 ]; then dist=(-p no:xdist); else dist=(-n "$workers"); fi
start=$(date +%s.%N)
PYTHONPATH=bench CGPLUG_OUT="$out" .venv/bin/pytest -p test_cpu_plugin "${dist[@]}" @"$ids" || rc=$?
end=$(date +%s.%N)
echo "rc=${rc:-0} wall=$(echo "$end - $start" | bc) cpu=$(( $(cat "$cg/cpuacct.usage") / 1000000000 ))"
echo $$ > /sys/fs/cgroup/cpuacct/tasks && rmdir "$cg" 2>/dev/null || true
