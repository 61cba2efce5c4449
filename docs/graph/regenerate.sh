#!/usr/bin/env bash
# Regenerates the pictures in docs/graph/ from examples/topologies, and docs/architecture.svg
# (needs Graphviz `dot`).
# Run from the repository root:  bash docs/graph/regenerate.sh
set -euo pipefail
topo=".venv/bin/topo"
ex="examples/topologies/acme_distributed.yaml"
out="docs/graph"
"$topo" graph "$ex" --out "$out/acme_distributed.svg"
"$topo" graph "$ex" --out "$out/acme_distributed.png"
"$topo" graph "$ex" --out "$out/acme_distributed.dot"
"$topo" graph "$ex" --out "$out/acme_distributed.mmd"
"$topo" graph "$ex" -p num_actors=64 -p num_learners=3 --show-disabled --out "$out/acme_distributed_64.svg"
"$topo" graph "$ex" -p num_actors=64 -p num_learners=3 --show-disabled --out "$out/acme_distributed_64.png"
# The rooms of topo (docs/architecture.md); tests/test_docs.py checks it against the layering rules.
dot -Tsvg docs/architecture.dot -o docs/architecture.svg
