#!/usr/bin/env bash
# A/B of the ssh backend across two commits, measured in the same run: one whole
# `topo run` of consumer_producers (30 producers on the 3 SSH test hosts) from each
# commit's tree in turn (farm-bench pairs them A B A B ...), and the launcher's own
# "all N nodes up in" figure of every run. Needs root, the test hosts' tools
# (../shared/testhosts) and farm-bench; takes the hosts lock and brings the hosts up
# and down itself.
#   bench/ssh_ab.sh BASE_REV [NEW_REV] [RUNS]     (writes bench/results/ssh-ab.md)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?base commit}; new=${2:-HEAD}; runs=${3:-7}
work=$(mktemp -d /tmp/topo-ssh-ab-XXXX)
trap 'rm -rf "$work"' EXIT
for side in base new; do
  mkdir -p "$work/$side"
  rev=$base; [ "$side" = new ] && rev=$new
  git archive "$rev" | tar -x -C "$work/$side"
  .venv/bin/python -m compileall -q "$work/$side/topo" "$work/$side/examples" >/dev/null
  cat > "$work/run-$side.sh" <<RUN
#!/bin/sh
cd "$work/$side" && PYTHONPATH="$work/$side" TOPO_HOME="$work/home-$side" exec "$PWD/.venv/bin/python" -m topo run examples/topologies/consumer_producers.yaml -b ssh --hosts examples/hosts/testhosts.yaml -p num_producers=30 -p work_items=60 --log-dir "$work/runs-$side" >>"$work/out-$side.txt" 2>&1
RUN
  chmod +x "$work/run-$side.sh"
done
hosts=../shared/testhosts/topo-hosts.sh
report=$(flock /work/notes/hosts.lock bash -c "$hosts up 3 >/dev/null 2>&1; farm-bench -n $runs --warmup 1 --timeout 900 --vs '$work/run-base.sh' -- '$work/run-new.sh'; $hosts down >/dev/null 2>&1")
up() { grep -o 'nodes up in [0-9.]*' "$work/out-$1.txt" | awk '{print $4}' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]" s (n="NR", "a[1]"–"a[NR]")"}'; }
{
  echo "# ssh A/B: base $(git rev-parse --short "$base") against new $(git rev-parse --short "$new")"
  echo
  echo "\`bench/ssh_ab.sh $*\`: a whole \`topo run\` of consumer_producers, 30 producers on the 3 test hosts; A = new, B = base, alternating."
  echo
  echo "Launcher's \"all 31 nodes up in\": base $(up base), new $(up new)."
  echo
  echo '```'
  echo "$report" | tail -13
  echo '```'
} > bench/results/ssh-ab.md
cat bench/results/ssh-ab.md
