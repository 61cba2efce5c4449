"""Stage 2, compile: Spec -> Program IR."""

from topo.compile.compiler import compile_spec

__all__ = ["compile_spec"]
