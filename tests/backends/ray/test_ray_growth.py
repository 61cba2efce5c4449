"""What a change to a running program adds on Ray (``topo apply``): bundles for the new
executables only, around the running ones, checked against the nodes' free resources:
pure functions over the Program IR (no Ray)."""

from __future__ import annotations

from typing import Any

from topo.backends.ray.growth import NODE_LABEL, additions, plan_growth

BASE = """
name: grow
nodes:
  worker: {{target: "m:W", count: {workers}, resources: {{spread: true}}}}
  actor: {{target: "m:A", count: {actors}}}
  {extra}
"""

FREE = {"n1": {"CPU": 1.0}, "n2": {"CPU": 1.0}, "n3": {"CPU": 1.0}}
IPS = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}


def _program(compile_text: Any, workers: int = 1, actors: int = 1, extra: str = "") -> Any:
    return compile_text(BASE.format(workers=workers, actors=actors, extra=extra))


def test_only_what_is_new_or_asks_for_other_resources_gets_a_bundle(compile_text: Any) -> None:
    running = _program(compile_text)
    grown = _program(compile_text, workers=3, actors=2)
    assert additions(running, grown) == ["worker/1", "worker/2", "actor/1"]
    assert additions(running, running) == []
    bigger = compile_text(
        BASE.format(workers=1, actors=1, extra="").replace(
            "count: 1}", "count: 1, resources: {cpus: [0, 1]}}"
        )
    )
    assert additions(running, bigger) == ["actor/0"]  # it restarts into a 2-CPU bundle


def test_new_spread_replicas_avoid_the_nodes_of_the_running_ones(compile_text: Any) -> None:
    running = _program(compile_text)
    grown = _program(compile_text, workers=3, actors=2)
    nodes = {"worker/0": "n2", "actor/0": "n1"}
    requests, errors = plan_growth(grown, additions(running, grown), nodes, FREE, IPS)
    assert errors == []
    spread, rest = requests
    assert (spread.name, spread.strategy, spread.exes) == (
        "worker",
        "STRICT_SPREAD",
        ("worker/1", "worker/2"),
    )
    assert spread.selectors == ({NODE_LABEL: "!in(n2)"}, {NODE_LABEL: "!in(n2)"})
    assert (rest.strategy, rest.exes, rest.selectors) == ("SPREAD", ("actor/1",), ())


def test_a_spread_group_that_outgrows_the_cluster_is_refused(compile_text: Any) -> None:
    running = _program(compile_text)
    grown = _program(compile_text, workers=4)
    nodes = {"worker/0": "n2", "actor/0": "n1"}
    _, [error] = plan_growth(grown, additions(running, grown), nodes, FREE, IPS)
    assert error.message == (
        "group 'worker' sets resources.spread: its 3 new process(es) need Ray nodes of "
        "their own that have 0.001 CPU free, beside the 1 its running processes are on, "
        "and the cluster has 2"
    )
    assert error.pos is not None and error.pos.line == 3  # the group in the file


def test_new_members_of_a_running_host_set_are_pinned_to_its_node(compile_text: Any) -> None:
    text = """
        name: grow
        nodes:
          learner: {target: "m:L"}
          replay: {target: "m:R", count: COUNT}
        colocation:
          - {name: core, nodes: ["@learner", "@replay"], mode: host}
        """
    running = compile_text(text.replace("COUNT", "1"))
    grown = compile_text(text.replace("COUNT", "2"))
    nodes = {"learner": "n3", "replay/0": "n3"}
    [request], errors = plan_growth(grown, ["replay/1"], nodes, FREE, IPS)
    assert errors == [] and additions(running, grown) == ["replay/1"]
    assert request.strategy == "STRICT_PACK" and request.selectors == ({NODE_LABEL: "n3"},)
    full = {**FREE, "n3": {"CPU": 0.0}}
    _, [error] = plan_growth(grown, ["replay/1"], nodes, full, IPS)
    assert error.message.startswith(
        "host-colocation set 'core' runs on Ray node 10.0.0.3, which has not 0.001 CPU free"
    )


def test_what_the_free_resources_cannot_hold_is_refused(compile_text: Any) -> None:
    running = _program(compile_text)
    extra = 'big: {target: "m:B", resources: {cpus: [0, 1]}}'
    grown = _program(compile_text, extra=extra)
    _, [error] = plan_growth(grown, additions(running, grown), {}, FREE, IPS)
    assert error.message == (
        "group 'big': no live Ray node has 2 CPU free for big (what runs keeps its "
        "reserved resources)"
    )
    assert error.hint is not None and "10.0.0.1: 1 CPU" in error.hint
    roomy = {**FREE, "n2": {"CPU": 3.0}}
    [request], errors = plan_growth(grown, ["big"], {}, roomy, IPS)
    assert errors == [] and request.exes == ("big",)


def test_an_executable_whose_placement_changes_gets_a_new_bundle(compile_text: Any) -> None:
    running = _program(compile_text, actors=2)
    spread = compile_text(
        BASE.format(workers=1, actors=2, extra="").replace(
            "count: 2}", "count: 2, resources: {spread: true}}"
        )
    )
    assert additions(running, spread) == ["actor/0", "actor/1"]  # into a STRICT_SPREAD group
