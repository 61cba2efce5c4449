"""What in a change to a running program (``topo apply``) stops it or loses work: such a
change is refused unless it is confirmed (``--yes``, or ``confirm=True`` in Python).

* A steps limiter (``topo.nodes:StepsLimiter``) started or restarted with a limit its
  counter already passed: the program would stop at once (a stop the program makes
  itself takes no snapshot).
* Nodes removed that keep a state (``save``/``restore``) with the last of their group (a
  learner or a replay group taken out): their state goes with them. A group scaled down
  (replicas removed, the group goes on: fewer actors) is what a change is for and needs
  no confirmation, as ``kubectl scale`` asks for none.
* Nodes restarted with ``--fresh`` that keep a state: they start over from nothing.

The running nodes are asked what they are (counts, whether they keep a state) through
a :class:`Probe`, the launcher's snapshotter.
"""

from __future__ import annotations

from typing import Any, Protocol

from topo.ir import Program, Ref
from topo.ir.diff_printer import node_names
from topo.supervisor.change_plan import LivePlan
from topo.supervisor.phases import LimiterProgress

LIMITER = "topo.nodes:StepsLimiter"


class Probe(Protocol):
    """What the hazards ask of the running program."""

    def keeps_state(self, node_ids: list[str]) -> dict[str, bool]: ...

    def counts(self, node_id: str) -> dict[str, Any] | None: ...


def hazards(
    running: Program,
    plan: LivePlan,
    keep_state: bool,
    probe: Probe,
    limiter: LimiterProgress | None = None,
) -> list[str]:
    """Why ``plan`` (from ``running``) needs to be confirmed; empty: it does not.
    ``limiter``: how far the running program's limiter got (if it reported)."""
    new = plan.program
    started = [n for e in (*plan.start, *plan.restart) for n in new.executable_index[e].nodes]
    out = [_limit_passed(new, node, probe, limiter) for node in started]
    going_on = {new.node_index[n].group for n in new.node_index}
    stopped = [
        n
        for e in plan.stop
        for n in running.executable_index[e].nodes
        # (not one that goes on in another process, nor a replica of a group that goes on)
        if n not in new.node_index and running.node_index[n].group not in going_on
    ]
    restarted = [n for e in plan.restart for n in running.executable_index[e].nodes]
    asked = stopped + ([] if keep_state else restarted)
    keeping = probe.keeps_state(asked) if asked else {}
    gone = [n for n in stopped if keeping.get(n)]
    if gone:
        out.append(
            f"{node_names(gone)} {'keeps' if len(gone) == 1 else 'keep'} a state "
            "(save/restore) and would be removed with its group: the state is lost"
        )
    fresh = [n for n in restarted if not keep_state and keeping.get(n)]
    if fresh:
        out.append(
            f"{node_names(fresh)} {'keeps' if len(fresh) == 1 else 'keep'} a state and "
            "would restart fresh (--fresh): the state is lost"
        )
    return [reason for reason in out if reason]


def _limit_passed(
    program: Program, node_id: str, probe: Probe, limiter: LimiterProgress | None
) -> str:
    """Why starting limiter ``node_id`` stops the program at once ("" when it does not)."""
    if program.target_of(node_id) != LIMITER:
        return ""
    args = program.node_index[node_id].args
    limit, key, counter = args.get("max_steps"), args.get("steps_key", "actor_steps"), None
    if isinstance(args.get("counter"), Ref):
        counter = args["counter"].node
    if not _number(limit) or not isinstance(key, str):
        return ""
    steps = None
    counts = probe.counts(counter) if counter is not None else None
    if counts is not None and _number(counts.get(key, 0)):
        steps = counts.get(key, 0)
    elif limiter is not None and limiter.key == key:
        steps = limiter.steps
    if steps is None or steps <= limit:
        return ""
    return (
        f"{node_id} would stop the program at once: {key} is {steps:,} already, over its "
        f"max_steps of {limit:,}"
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
