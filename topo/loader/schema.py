"""The JSON Schema of topology files, generated from the pydantic models.

Fields that take numbers, booleans, lists or mappings (or set words, where marked) also
accept a ``${...}`` expression string, so the schema says so; editors then accept
``count: ${num_actors}`` while still completing keys and checking kinds.
"""

from __future__ import annotations

import json
from typing import Any

from topo.loader.models import topology_model

SCHEMA_ID = "https://topo.dev/schemas/topology.schema.json"
_EXPR = {"$ref": "#/$defs/Expression"}
_EXPRESSION_DEF = {
    "type": "string",
    "pattern": r"^\$\{.*\}$",
    "description": "A ${...} expression over params, evaluated when the file is loaded.",
}
_SKIP = {"args", "overrides", "params"}  # free-form values: nothing to widen
EXPRESSION_MARK = "x-topo-expression"  # a field of set words a ${...} may give (dropped)


def _widen(schema: Any) -> Any:
    """Allow an expression wherever a non-string value is expected."""
    if not isinstance(schema, dict):
        return schema
    out = {k: _widen_props(v) if k == "properties" else _widen(v) for k, v in schema.items()}
    return out


def _widen_props(props: dict[str, Any]) -> dict[str, Any]:
    result = {}
    for name, prop in props.items():
        prop = _widen(prop)
        if name not in _SKIP and _takes_non_string(prop):
            description = prop.get("description")
            default = prop.get("default")
            dropped = ("description", "default", "title", EXPRESSION_MARK)
            inner = {k: v for k, v in prop.items() if k not in dropped}
            prop = {"anyOf": [inner, _EXPR]}
            if description:
                prop["description"] = description
            if default is not None or "default" in inner:
                prop["default"] = default
        result[name] = prop
    return result


def _takes_non_string(prop: dict[str, Any]) -> bool:
    """Whether the field takes what an expression string is not: a number, a boolean, a
    list, or one of set words where a parameter may choose the word (``EXPRESSION_MARK``:
    an accelerator's ``kind: "${learner_accelerator}"``)."""
    if prop.get("type") in ("integer", "number", "boolean", "array") or prop.get(EXPRESSION_MARK):
        return True
    return any(_takes_non_string(p) for p in prop.get("anyOf", []) if isinstance(p, dict))


def topology_schema() -> dict[str, Any]:
    """The schema as a dict."""
    schema = topology_model().model_json_schema(by_alias=True, mode="validation")
    schema = _widen(schema)
    schema.setdefault("$defs", {})["Expression"] = _EXPRESSION_DEF
    schema["$id"] = SCHEMA_ID
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "topo topology"
    return schema


def schema_text() -> str:
    """The schema as the text of schemas/topology.schema.json (the package ships it through
    the link topo/schema/topology.schema.json)."""
    return json.dumps(topology_schema(), indent=2, sort_keys=True) + "\n"
