"""Pictures of a Program: DOT, Mermaid and a terminal tree, all drawn from one view.

``build_view(program, ViewOptions(...))`` decides what is shown (collapsing, focus,
disabled nodes); ``to_dot``, ``to_mermaid`` and ``to_tree`` draw that view; the
:mod:`topo.render.graphviz` module runs the real ``dot`` program for SVG/PNG.
"""

from topo.render.dot import to_dot
from topo.render.graphviz import GraphvizError, render
from topo.render.mermaid import to_mermaid
from topo.render.model import (
    DEFAULT_COLLAPSE_ABOVE,
    UnknownGroupError,
    View,
    ViewEdge,
    ViewNode,
    ViewOptions,
    build_view,
)
from topo.render.tree import to_tree

__all__ = [
    "DEFAULT_COLLAPSE_ABOVE",
    "GraphvizError",
    "UnknownGroupError",
    "View",
    "ViewEdge",
    "ViewNode",
    "ViewOptions",
    "build_view",
    "render",
    "to_dot",
    "to_mermaid",
    "to_tree",
]
