"""The DQN examples' learning curve as the benches read it: the evaluator's log lines
(``evaluator: 12.3s actor_steps=… learner_steps=… mean return over N episodes: R``) and
the snapshots' counts of actor steps. Shared by the learning, resume and preemption
benches so that they score runs alike."""

from __future__ import annotations

import json
import re
from pathlib import Path

EVAL = re.compile(
    r"evaluator:\s+([0-9.]+)s actor_steps=(\d+) learner_steps=(\d+) "
    r"mean return over (\d+) episodes: (-?[0-9.]+)"
)
GOAL = 475.0  # CartPole's "solved" mean return, the benches' goal
FIRST_ATTEMPT = "── topo: attempt 1 started"  # a launcher's first start of a node

Curve = list[dict[str, float]]


def evaluations(text: str) -> Curve:
    """Each evaluation in an evaluator's log ``text``, oldest first: its ``wall_s`` (the
    node's clock), ``actor_steps``, ``learner_steps``, ``mean_return`` and ``life`` (0,
    then 1, 2... for each launcher that started the node afresh, e.g. a requeued job)."""
    curve: Curve = []
    life = -1
    for line in text.splitlines():
        if FIRST_ATTEMPT in line:
            life += 1
        m = EVAL.search(line)
        if m:
            curve.append(
                {
                    "life": max(life, 0),
                    "wall_s": float(m[1]),
                    "actor_steps": int(m[2]),
                    "learner_steps": int(m[3]),
                    "mean_return": float(m[5]),
                }
            )
    return curve


def curve_of(run_dir: Path) -> Curve:
    """The evaluations so far of the run in ``run_dir`` (its ``evaluator_0`` log)."""
    path = run_dir / "logs" / "evaluator_0.log"
    return evaluations(path.read_text(errors="replace") if path.is_file() else "")


def reached(curve: Curve) -> dict[str, float] | None:
    """The first evaluation at the goal, if any."""
    return next((p for p in curve if p["mean_return"] >= GOAL), None)


def snapshot_steps(run_dir: Path) -> dict[int, int]:
    """The run's snapshots, number -> the counter's actor steps in it."""
    found = {}
    root = run_dir / "snapshots"
    for path in root.iterdir() if root.is_dir() else ():
        manifest = path / "manifest.json"
        if path.name.isdigit() and manifest.is_file():
            counts = json.loads(manifest.read_text())["counts"]
            found[int(path.name)] = int(counts["counter"]["actor_steps"])
    return dict(sorted(found.items()))
