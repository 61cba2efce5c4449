"""The topology a run keeps (``topology.yaml`` of its run directory): the file as written,
with each ``-p`` value written as its parameter's default.

Loading it again gives the same program, and ``-p`` on it still means what it meant on
the original (its ``${...}`` are kept, not replaced by their values). A file that
extends nothing keeps its comments and layout; one that extends others is written
with its bases merged in (the run directory does not hold the bases).
"""

from __future__ import annotations

import copy
import io
from typing import Any

from topo.loader.params import Param
from topo.loader.read import LoadedSpec

_LONG_FORM_KEYS = {"default", "type", "help"}
_HEADER = "# as run: "


def _escaped(value: Any) -> Any:
    """A ``-p`` string value as a default that reads back as the same text: a ``-p``
    value is taken literally, a default's ``${`` is interpolated (``$${`` is a literal)."""
    return value.replace("${", "$${") if isinstance(value, str) else value


def _long_form(decl: Any) -> bool:
    return isinstance(decl, dict) and bool(decl) and set(decl) <= _LONG_FORM_KEYS


def _set_default(params: dict[str, Any], param: Param) -> None:
    """Write ``param``'s value as its default in the ``params:`` mapping, in the form the
    declaration has (short ``name: value`` or long ``{default, type, help}``)."""
    value = _escaped(param.value)
    decl = params.get(param.name)
    if isinstance(decl, dict) and _long_form(decl):
        decl["default"] = value
    elif _long_form(value) or value is None:  # would read as a long form, or lose its type
        params[param.name] = {"default": value, "type": param.type}
    else:
        params[param.name] = value


def _with_defaults(data: dict[str, Any], loaded: LoadedSpec) -> dict[str, Any]:
    params = data.get("params")
    if isinstance(params, dict):
        for param in loaded.params.values():
            if param.overridden and param.name in params:
                _set_default(params, param)
    return data


def saved_yaml(loaded: LoadedSpec) -> str:
    """The text of the run directory's ``topology.yaml`` for ``loaded``."""
    from ruamel.yaml import YAML

    out = io.StringIO()
    if loaded.tree is not None and isinstance(loaded.tree, dict):
        yaml = YAML(typ="rt")
        yaml.preserve_quotes = True
        yaml.width = 4096
        yaml.dump(_with_defaults(copy.deepcopy(loaded.tree), loaded), out)
    else:
        source = loaded.raw if loaded.raw is not None else loaded.data
        out.write(f"# {loaded.file} with the files it extends merged in\n")
        yaml = YAML()
        yaml.default_flow_style = False
        yaml.width = 4096
        yaml.dump(_with_defaults(copy.deepcopy(source), loaded), out)
    body = out.getvalue()
    while body.startswith(_HEADER):  # the file is itself a saved one (topo run --from)
        body = body.partition("\n")[2]
    given = [p.name for p in loaded.params.values() if p.overridden]
    if not given:
        return body
    return f"{_HEADER}the defaults of {', '.join(given)} are the values given with -p\n{body}"
