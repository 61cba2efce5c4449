#!/bin/bash
# How bench/results/accelerators.md was made: topo and its base dependencies as wheels,
# carried to the machine with the accelerator (the `device` tool of this workplace: one
# TPU v5e chip, JAX installed, no root, no network), then bench/accelerators_bench.py.
#
# Here, in the repository root (an ordinary clone):
#   bash bench/accelerators_device.sh prepare     # .whl-tpu/ and .tpu-tree/ (git-ignored)
# There (device.run, carry [".whl-tpu", ".tpu-tree"]):
#   bash .tpu-tree/accelerators_device.sh run     # writes $OUT/accelerators.{md,json}
# Back here:
#   .venv/bin/python bench/accelerators_bench.py --render DIR/accelerators.json
set -euo pipefail
case "${1:-}" in
  prepare)
    grep -qx '/.whl-tpu/' .git/info/exclude || echo '/.whl-tpu/' >> .git/info/exclude
    grep -qx '/.tpu-tree/' .git/info/exclude || echo '/.tpu-tree/' >> .git/info/exclude
    rm -rf .whl-tpu .tpu-tree && mkdir -p .whl-tpu .tpu-tree/bench
    platforms=()
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 \
      manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
      platforms+=(--platform "$p")
    done
    # topo's base dependencies at the versions of requirements.lock (not numpy: the
    # machine's own, beside its JAX)
    for name in pydantic pydantic-core typer click shellingham rich markdown-it-py mdurl \
      pygments ruamel-yaml pyzmq multiprocess dill psutil cloudpickle setproctitle \
      annotated-types annotated-doc typing-extensions typing-inspection; do
      pin=$(grep -i "^${name}==" requirements.lock)
      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --implementation cp "${platforms[@]}" -d .whl-tpu "$pin"
    done
    .venv/bin/python -m pip wheel -q --no-deps . -w .whl-tpu  # topo itself: its backends
    cp bench/accelerators_bench.py bench/accel_nodes.py bench/accelerators_device.sh .tpu-tree/
    mv .tpu-tree/accelerators_bench.py .tpu-tree/accel_nodes.py .tpu-tree/bench/
    du -sh .whl-tpu .tpu-tree ;;
  run)
    PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps \
      --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl
    export PYTHONPATH=${PYTHONPATH:-}:/tmp/site TOPO_HOME=/tmp/topo-home PYTHONUNBUFFERED=1
    cd .tpu-tree
    python3 bench/accelerators_bench.py --kind tpu --actors 8 --seconds 10 --out "$OUT" ;;
  *)
    sed -n '2,13p' "$0"; exit 2 ;;
esac
