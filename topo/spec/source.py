"""Reading YAML with positions: a plain data tree plus a map from paths to file:line:col."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError

from topo.diagnostics import SourcePos, TopoError

PathKey = tuple[str | int, ...]


@dataclass
class SourceMap:
    """Positions of every mapping key and value of a loaded tree, by path."""

    values: dict[PathKey, SourcePos] = field(default_factory=dict)
    keys: dict[PathKey, SourcePos] = field(default_factory=dict)

    def pos(self, path: PathKey, *, key: bool = False) -> SourcePos | None:
        """Position of ``path`` (its key if ``key``), else of its nearest known ancestor."""
        p = tuple(path)
        while True:
            table = self.keys if key else self.values
            if p in table:
                return table[p]
            if key and p in self.values:
                return self.values[p]
            if not p:
                return None
            p = p[:-1]

    def update(self, other: SourceMap, prefix: PathKey = ()) -> None:
        """Take ``other``'s positions (under ``prefix``), overriding ours where both have one."""
        for k, v in other.values.items():
            self.values[prefix + k] = v
        for k, v in other.keys.items():
            self.keys[prefix + k] = v


@dataclass
class Document:
    """One YAML file: its plain data and where each piece of it was written."""

    file: str
    data: Any
    sources: SourceMap


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    return y


def _plain(node: Any, path: PathKey, file: str, sm: SourceMap) -> Any:
    """Convert ruamel's round-trip objects to plain Python, recording positions."""
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for k, v in node.items():
            line, col, vline, vcol = node.lc.data[k]
            key = str(k) if not isinstance(k, str) else k
            sm.keys[(*path, key)] = SourcePos(file, line + 1, col + 1)
            sm.values[(*path, key)] = SourcePos(file, vline + 1, vcol + 1)
            out[key] = _plain(v, (*path, key), file, sm)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, v in enumerate(node):
            if i in node.lc.data:
                line, col = node.lc.data[i]
                sm.values[(*path, i)] = SourcePos(file, line + 1, col + 1)
            items.append(_plain(v, (*path, i), file, sm))
        return items
    if isinstance(node, TaggedScalar):
        raise TopoError.one(
            f"YAML tag {node.tag.value!r} is not used by topo",
            sm.pos(path),
            'write a reference as a quoted string, e.g. "@replay", and an expression as "${n - 1}"',
        )
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if hasattr(node, "tag"):  # a tagged mapping or sequence
        raise TopoError.one(
            "YAML tags are not used by topo", sm.pos(path), "remove the '!tag' before the value"
        )
    return node


def _syntax_error(file: str, exc: MarkedYAMLError, text: str = "") -> TopoError:
    mark = exc.problem_mark or exc.context_mark
    pos = SourcePos(file, mark.line + 1, mark.column + 1) if mark else SourcePos(file, 1, 1)
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    hint = None
    lines = text.splitlines()
    line_text = lines[pos.line - 1] if 0 < pos.line <= len(lines) else ""
    if "${" in line_text and ("{" in problem or "}" in problem or "," in problem):
        hint = (
            'inside [ ] or { } a ${...} expression must be quoted: write "${n - 1}", '
            "or put the value on its own line in block style"
        )
    elif "'@'" in problem or "'`'" in problem:
        hint = (
            "'@' cannot start a plain YAML value: quote the reference, "
            'e.g. replay: "@replay" or ["@learner", "@learner2"]'
        )
    elif "duplicate key" in problem:
        hint = "each key may appear once per mapping; remove or rename one of them"
    elif "mapping values are not allowed" in problem:
        hint = (
            "a value containing ': ' must be quoted, "
            "or a nested mapping needs its own indented line"
        )
    elif "could not find expected ':'" in problem or "expected <block end>" in problem:
        hint = "check the indentation of this line against the lines above it"
    return TopoError.one(f"invalid YAML: {problem}", pos, hint)


def parse_text(text: str, file: str) -> Document:
    """Parse YAML text into a :class:`Document`; syntax errors become diagnostics."""
    sm = SourceMap()
    try:
        raw = _yaml().load(text)
    except MarkedYAMLError as exc:
        raise _syntax_error(file, exc, text) from None
    except Exception as exc:  # ruamel raises a few unmarked errors (e.g. bad encodings)
        raise TopoError.one(f"invalid YAML: {exc}", SourcePos(file, 1, 1)) from None
    sm.values[()] = SourcePos(file, 1, 1)
    return Document(file, _plain(raw, (), file, sm), sm)


def read_document(path: Path) -> Document:
    """Read and parse a YAML file."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopoError.one(f"no such file: {file}") from None
    except IsADirectoryError:
        raise TopoError.one(f"{file} is a directory, not a topology file") from None
    except UnicodeDecodeError as exc:
        raise TopoError.one(f"{file} is not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise TopoError.one(f"cannot read {file}: {exc.strerror}") from None
    return parse_text(text, file)


def walk_strings(data: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, str]]:
    """Every string leaf of a plain tree with its path."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from walk_strings(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from walk_strings(v, (*path, i))
    elif isinstance(data, str):
        yield path, data
