#!/bin/bash
# The whole suite from a fresh clone beside busy loops (issue 42's check):
#   bash bench/busy_suite.sh OUT_DIR [LOOPS]      (default 2 loops)
# Starts LOOPS `yes > /dev/null` (pids noted), clones this repository's HEAD into a
# temporary directory, runs `CI=true bash .ci/run` there, ends the loops by pid, and
# leaves in OUT_DIR: info.txt (commit, loops, start, exit code, wall), ci.log and the
# run's test-results/ (durations.md, durations.json, failures.txt).
set -u
out=$(realpath -m "$1"); loops=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
clone=$(mktemp -d /tmp/topo-busy-XXXXXX)
chmod 755 "$clone"  # as a clone anywhere else: tests run a process as 'nobody' from it
pids=()
for _ in $(seq "$loops"); do yes > /dev/null & pids+=($!); done
{ echo "commit: $(git -C "$root" rev-parse --short HEAD)"; echo "busy loops: ${pids[*]}"; } > "$out/info.txt"
git clone -q "$root" "$clone/topo"
start=$(date +%s); echo "start: $(date -Is)" >> "$out/info.txt"
(cd "$clone/topo" && CI=true bash .ci/run) > "$out/ci.log" 2>&1
rc=$?
end=$(date +%s)
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
{ echo "rc: $rc"; echo "wall: $((end - start)) s"; } >> "$out/info.txt"
cp -r "$clone/topo/test-results" "$out/" 2>/dev/null
rm -rf "$clone"
exit $rc
