"""The graph checks run on the IR (topo.ir.checks, topo.ir.packing) and the YAML compiler
places what they find: each problem at file:line:col of the YAML that asks for it."""

from __future__ import annotations

from typing import Any

import pytest

HEAD = "name: t\nnodes:\n"


def position(text: str, needle: str) -> tuple[int, int]:
    """(line, col), 1-based, of the first ``needle`` in ``text``."""
    before = text[: text.index(needle)]
    return before.count("\n") + 1, len(before) - before.rfind("\n")


@pytest.mark.parametrize(
    ("body", "at", "message"),
    [
        (  # a primary: at its value
            "  a: {target: m:A, count: 2}\n  b: {target: m:B, primary: '@a'}\n",
            "'@a'}",
            "group 'b': primary 'a' must be a single node (no count)",
        ),
        (
            "  a: {target: m:A}\n  b: {target: m:B, primary: '@b'}\n",
            "'@b'}",
            "group 'b' cannot be its own primary",
        ),
        (  # a thread set of a primary with secondaries: at the colocation list
            "  l: {target: m:A}\n  s: {target: m:B, count: 2, primary: '@l'}\n"
            "  r: {target: m:C}\ncolocation:\n  - nodes: ['@l', '@r']\n",
            "- nodes",
            "'l' is thread-colocated with r in 'l+r', but it has 2 secondary node(s) in s",
        ),
        (  # restart policies in one process: at the colocation list
            "  a: {target: m:A, restart: {policy: always}}\n  b: {target: m:B}\n"
            "colocation:\n  - nodes: ['@a', '@b']\n",
            "- nodes",
            "the groups in 'a+b' (a, b) have different restart policies",
        ),
        (  # a node packed twice: at the second entry's nodes
            "  a: {target: m:A}\n  b: {target: m:B}\n"
            "colocation:\n  - nodes: ['@a', '@b']\n  - {name: x, nodes: ['@a']}\n",
            "['@a']}",
            "node 'a' is in two threads colocation sets ('a+b' and 'x')",
        ),
        (  # two sets of one name: at the second entry
            "  a: {target: m:A, count: 2}\n  b: {target: m:B, count: 2}\n"
            "colocation:\n  - nodes: ['@a[0]', '@b[0]']\n  - nodes: ['@a[1]', '@b[1]']\n",
            "nodes: ['@a[1]'",
            "two thread colocation sets are named 'a+b'",
        ),
        (  # spread and a host set: at the group's spread
            "  a: {target: m:A, count: 2, resources: {spread: true}}\n"
            "colocation:\n  - {nodes: ['@a'], mode: host}\n",
            "true}",
            "group 'a' sets resources.spread",
        ),
    ],
)
def test_graph_problems_are_placed_in_the_yaml(
    errors_of: Any, body: str, at: str, message: str
) -> None:
    text = HEAD + body
    f = errors_of(text)
    [d] = f.diagnostics
    assert message in d.message
    line, col = position(text, at)
    assert f.where() == ("topology.yaml", line, col)
