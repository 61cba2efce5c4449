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
    where each goes, and why the others could not (``given``: the -p values). A
    parameter is kept when the file read with ``-p name=V`` is the program that
    exporting the builder called with ``name=V`` gives (both read back as YAML)."""

    def build(kwargs: dict[str, Any]) -> dict[str, Any]:
        return export_doc(build_program(path, kwargs, seed=seed).program).doc

    base = build(dict(given))
    uses = find_uses(build, given, scalar_params(load_builder(path), given), base)
    with tempfile.TemporaryDirectory(prefix="topo-export-") as tmp:
        for name in list(uses.paths):
            default, other = uses.defaults[name], moved(uses.defaults[name])[0]
            param = {name: default}
            try:
                tuned = _read(Path(tmp), path, given, seed, param, {name: uses.paths[name]})
                if tuned({}) != _read(Path(tmp), path, given, seed)({}) or tuned(
                    {name: other}
                ) != _read(Path(tmp), path, {**given, name: other}, seed)({}):
                    uses.drop(name, f"-p {name}=... on the YAML would build another program")
            except Exception as exc:
                uses.drop(name, f"the YAML could not take ${{{name}}} there ({exc})")
    return uses


def _read(
    tmp: Path,
    path: str,
    given: Mapping[str, Any],
    seed: int,
    params: Mapping[str, Any] | None = None,
    uses: Mapping[str, Any] | None = None,
) -> Any:
    """A function of -p values: the document of the file exported from the builder
    (called with ``given``, written with ``params`` and ``uses``), read back with them."""
    from topo.api import load

    text = export_program(
        build_program(path, dict(given), seed=seed).program,
        schema="",
        params=params,
        uses=uses,
    ).text
    file = tmp / f"check-{abs(hash(text))}.yaml"
    file.write_text(text, encoding="utf-8")

    def read(overrides: Mapping[str, Any]) -> dict[str, Any]:
        return _body(export_doc(load(file, dict(overrides)).program).doc)

    return read
