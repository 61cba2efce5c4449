#!/usr/bin/env bash
# Acme's and Mava's own distributed builders on topo.launchpad (issue 26).
#
# Prepares a scratch directory (never the repo, never the project's venv): the sources
# from the local mirrors, their pure-Python dependencies (pip install --target, no
# dependency resolution: jax, haiku, reverb and tensorflow come from the venv), and a
# `launchpad` package that is topo.launchpad. Then runs:
#   acme        Acme's distributed DQN (make_distributed_experiment) on CartPole,
#               local_mt then local_mp, to --num_steps actor steps
#   acme-tests  Acme's own distributed-agent tests (TF agents, test_mt)
#   export      topo export of a builder around make_distributed_experiment
#   mava        Mava 0.1.3's MADQN system test (test_mt) and a local_mp run
#
#   bench/acme_on_topo.sh [prepare|acme|acme-tests|export|mava|all]   (default: all)
#
# Logs go to $SCRATCH/logs; results are written up in bench/results/acme_on_topo.md.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE="$ROOT/bench/acme_on_topo"
SCRATCH=${SCRATCH:-/tmp/acme-on-topo}
ACME_MIRROR=${ACME_MIRROR:-/work/.mirror/google-deepmind+acme/repo}
MAVA_MIRROR=${MAVA_MIRROR:-/work/.mirror/instadeepai+Mava/repo}
# The last Acme commit that runs on jax 0.4.x (later ones use jax.P and pmap options).
ACME_REV=${ACME_REV:-8ec1a77}
MAVA_REV=0.1.3          # the last Mava release built on Launchpad
MAVA_ACME_REV=0.4.0     # the Acme Mava 0.1.3 depends on (dm-acme~=0.4.0)
STEPS=${STEPS:-2000}
PYTHON=${PYTHON:-python}
LOGS="$SCRATCH/logs"

ACME_DEPS="dm-env==1.6 rlax==0.1.6 distrax==0.1.5 tensorflow-probability==0.23.0 decorator
dm-sonnet==2.0.2 trfl==1.2.0 gym==0.25.0 gym-notices rlds==0.1.8"
MAVA_DEPS="gym==0.23.0"

acme_path() { echo "$ROOT:$SCRATCH/shim:$SCRATCH/acme:$SCRATCH/deps"; }
mava_path() { echo "$ROOT:$SCRATCH/shim:$SCRATCH/mava:$SCRATCH/acme040:$SCRATCH/mava-deps:$SCRATCH/deps"; }

prepare() {
    mkdir -p "$SCRATCH"/{acme,acme040,mava,deps,mava-deps,shim/launchpad} "$LOGS"
    git -C "$ACME_MIRROR" archive "$ACME_REV" acme | tar -x -C "$SCRATCH/acme"
    git -C "$ACME_MIRROR" archive "$MAVA_ACME_REV" acme | tar -x -C "$SCRATCH/acme040"
    # (the mirror lacks one of Mava's images: git archive complains, the sources come out)
    git -C "$MAVA_MIRROR" archive "$MAVA_REV" mava tests/systems | tar -x -C "$SCRATCH/mava"
    cp "$HERE/launchpad_shim.py" "$SCRATCH/shim/launchpad/__init__.py"
    # Acme 0.4.0 was written against reverb 0.7; reverb 0.14's trajectory_writer has no
    # get_signature_timeout_ms (a scratch-only patch, of Acme, not of topo)
    sed -i '/get_signature_timeout_ms=self._get_signature_timeout_ms)/d; s/num_keep_alive_refs=self._max_sequence_length,$/num_keep_alive_refs=self._max_sequence_length)/' \
        "$SCRATCH/acme040/acme/adders/reverb/base.py"
    # shellcheck disable=SC2086
    "$PYTHON" -m pip install -q --target "$SCRATCH/deps" --no-deps $ACME_DEPS
    # shellcheck disable=SC2086
    "$PYTHON" -m pip install -q --target "$SCRATCH/mava-deps" --no-deps $MAVA_DEPS
    echo "prepared $SCRATCH (acme $ACME_REV, mava $MAVA_REV on acme $MAVA_ACME_REV)"
}

timed() {  # timed NAME CMD...: run CMD with its output in $LOGS/NAME.log; one line of result
    local name=$1 start rc
    shift
    start=$(date +%s)
    "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc in $(($(date +%s) - start))s $(grep -h '^SUMMARY\|passed\|failed' \
        "$LOGS/$name.log" | tail -1)"
}

acme() {
    cd "$SCRATCH" || exit 1
    for launch in local_mt local_mp; do
        rm -rf "$SCRATCH/out-$launch"
        PYTHONPATH=$(acme_path) timed "acme_dqn_$launch" timeout 900 "$PYTHON" \
            "$HERE/acme_dqn.py" --lp_launch_type=$launch --num_steps="$STEPS" \
            --out="$SCRATCH/out-$launch"
    done
    # Acme's inference server in front of the actors (stops at batching DQN's actor state)
    rm -rf "$SCRATCH/out-inference"
    PYTHONPATH=$(acme_path) timed acme_dqn_inference_local_mt timeout 900 "$PYTHON" \
        "$HERE/acme_dqn.py" --lp_launch_type=local_mt --num_steps="$STEPS" --inference_server \
        --out="$SCRATCH/out-inference"
}

acme_tests() {
    cd "$SCRATCH" || exit 1
    # mcts and mog_mpo have no distributed test; mompo's needs dm_control
    for agent in dqn d4pg ddpg dmpo mpo r2d2 impala svg0_prior; do
        PYTHONPATH=$(acme_path) timed "acme_tf_$agent" timeout 600 "$PYTHON" -m pytest -q \
            -p no:cacheprovider "acme/acme/agents/tf/$agent/agent_distributed_test.py"
    done
}

export_builder() {
    cd "$SCRATCH" || exit 1
    cat >"$SCRATCH/acme_export.py" <<'EOF'
"""make_distributed_experiment behind plain parameters, for topo export."""
import sys

from absl import flags

flags.FLAGS(sys.argv[:1], known_only=True)
import acme_dqn  # noqa: E402
from acme.jax import experiments  # noqa: E402


def make_program(num_actors: int = 2):
    config = acme_dqn.build_experiment_config()
    return experiments.make_distributed_experiment(config, num_actors=num_actors)
EOF
    PYTHONPATH="$(acme_path):$SCRATCH:$HERE" timed acme_export timeout 300 "$PYTHON" -m topo \
        export acme_export:make_program -o "$SCRATCH/acme_dqn.yaml"
    grep '^error' "$LOGS/acme_export.log"
}

mava() {
    cd "$SCRATCH/mava" || exit 1
    PYTHONPATH=$(mava_path) timed mava_madqn_test timeout 900 "$PYTHON" -m pytest -q \
        -p no:cacheprovider tests/systems/madqn_system_test.py -k "not recurrent"
    PYTHONPATH=$(mava_path) timed mava_madqn_local_mp timeout 900 "$PYTHON" \
        "$HERE/mava_madqn.py" --lp_launch_type=local_mp --trainer_steps=200
}

case "${1:-all}" in
prepare) prepare ;;
acme) acme ;;
acme-tests) acme_tests ;;
export) export_builder ;;
mava) mava ;;
all) prepare && acme && acme_tests && export_builder && mava ;;
*) echo "usage: $0 [prepare|acme|acme-tests|export|mava|all]" >&2 && exit 2 ;;
esac
