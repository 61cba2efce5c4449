"""The builder's parameters in an exported file: found by :mod:`topo.export.params`,
then each checked by reading the YAML back with it moved (the loader is the judge of
what ``${name}`` can stand for), so a parameter is written only where ``-p`` on the file
builds what the builder builds with that value."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topo.export import build_program, export_doc, export_program, load_builder
from topo.export.params import Uses, find_uses, moved, scalar_params


def _body(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("name", "params")}


def builder_uses(path: str, given: Mapping[str, Any], seed: int) -> Uses:
    """The builder's plain parameters that the exported file can take as ``params:``,
    where each goes, and why the others could not (``given``: the -p values)."""
    from topo.api import load

    def build(kwargs: dict[str, Any]) -> dict[str, Any]:
        return export_doc(build_program(path, kwargs, seed=seed).program).doc

    base = build(dict(given))
    uses = find_uses(build, given, scalar_params(load_builder(path), given), base)
    with tempfile.TemporaryDirectory(prefix="topo-export-") as tmp:
        file = Path(tmp) / "check.yaml"
        for name in list(uses.paths):
            one = {name: uses.paths[name]}
            text = export_program(
                build_program(path, dict(given), seed=seed).program,
                schema="",
                params={name: uses.defaults[name]},
                uses=one,
            ).text
            file.write_text(text, encoding="utf-8")
            other = moved(uses.defaults[name])[0]
            try:
                same = _body(export_doc(load(file).program).doc) == _body(base)
                same = same and _body(export_doc(load(file, {name: other}).program).doc) == (
                    _body(build({**given, name: other}))
                )
            except Exception as exc:
                uses.drop(name, f"the YAML could not take ${{{name}}} there ({exc})")
                continue
            if not same:
                uses.drop(name, f"-p {name}=... on the YAML would build another program")
    return uses
