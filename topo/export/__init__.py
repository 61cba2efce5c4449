"""``topo export``: a Launchpad program (or any compiled Program IR) written as a
topology YAML file that compiles back to the same program.

A stage that reads the IR, like :mod:`topo.render`: it imports neither the YAML
loader (``topo.loader``) nor the backends.
"""

from topo.export.builder import build_program, load_builder
from topo.export.writer import Document, Exported, ExportError, export_doc, export_program

__all__ = [
    "Document",
    "ExportError",
    "Exported",
    "build_program",
    "export_doc",
    "export_program",
    "load_builder",
]
