"""Reading YAML with positions: a plain data tree plus a map from paths to file:line:col."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

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
    tree: Any = None  # ruamel's round-trip tree (comments kept), for writing the file again


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.Composer = _BoundedComposer
    y.Constructor = _BoundedConstructor
    y.preserve_quotes = True
    return y


# Bounds on what one YAML document may expand to (docs/topology.md, "Limits"): aliases let a few
# lines stand for billions of nodes, and anchors can even refer to themselves.
MAX_YAML_NODES = 50_000
MAX_YAML_DEPTH = 100
MAX_FILE_BYTES = 4 * 1024 * 1024
_MAP_TAGS = (None, "tag:yaml.org,2002:map")
_SEQ_TAGS = (None, "tag:yaml.org,2002:seq")


class _Plainer:
    """Converts ruamel's round-trip objects to plain Python, recording positions and
    counting every node it produces (aliases count once per use)."""

    def __init__(self, file: str, sm: SourceMap) -> None:
        self.file = file
        self.sm = sm
        self.nodes = 0
        self.active: set[int] = set()

    def _enter(self, node: Any, path: PathKey) -> None:
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            raise TopoError.one(
                f"this document expands to more than {MAX_YAML_NODES:,} YAML values "
                "(through aliases '*name' and merge keys '<<')",
                self.sm.pos(path),
                "an alias copies everything its anchor holds; write the values out instead",
            )
        if len(path) > MAX_YAML_DEPTH:
            raise TopoError.one(
                f"values are nested more than {MAX_YAML_DEPTH} levels deep", self.sm.pos(path)
            )
        if id(node) in self.active:
            raise TopoError.one(
                "an alias refers to a mapping or list that contains it", self.sm.pos(path)
            )

    def _key_pos(self, node: CommentedMap, key: Any) -> list[int] | None:
        """Where ``key`` of ``node`` was written: in the node, or in a map merged into it."""
        todo = [node]
        seen: set[int] = set()
        while todo:
            m = todo.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            data = getattr(getattr(m, "lc", None), "data", None) or {}
            if key in data and len(data[key]) == 4:
                return list(data[key])
            todo.extend(x for x in getattr(m, "merge", ()) if isinstance(x, CommentedMap))
        return None

    def _tag(self, node: Any) -> str | None:
        tag = getattr(node, "tag", None)
        return getattr(tag, "value", None) if tag is not None else None

    def _refuse_tag(self, tag: str | None, path: PathKey) -> TopoError:
        shown = (tag or "").replace("tag:yaml.org,2002:", "!!")
        return TopoError.one(
            f"YAML tag {shown!r} is not used by topo"
            if shown
            else "YAML tags are not used by topo",
            self.sm.pos(path),
            "remove the tag before the value; topo reads plain mappings, lists and scalars",
        )

    def plain(self, node: Any, path: PathKey) -> Any:
        """The plain value of ``node`` found at ``path``."""
        if isinstance(node, CommentedMap):
            if type(node) is not CommentedMap or self._tag(node) not in _MAP_TAGS:
                raise self._refuse_tag(self._tag(node) or "!!omap", path)
            return self._map(node, path)
        if isinstance(node, CommentedSeq):
            if type(node) is not CommentedSeq or self._tag(node) not in _SEQ_TAGS:
                raise self._refuse_tag(self._tag(node), path)
            self._enter(node, path)
            self.active.add(id(node))
            items = []
            for i, v in enumerate(node):
                lc = node.lc.data.get(i) if node.lc.data else None
                if lc is not None and len(lc) >= 2:
                    self.sm.values[(*path, i)] = SourcePos(self.file, lc[0] + 1, lc[1] + 1)
                items.append(self.plain(v, (*path, i)))
            self.active.discard(id(node))
            return items
        self._enter(node, path)
        if isinstance(node, TaggedScalar):
            raise self._refuse_tag(self._tag(node), path)
        if isinstance(node, bool) or node is None:
            return node
        for kind in (int, float, str):
            if isinstance(node, kind):
                return kind(node)
        if hasattr(node, "tag") or isinstance(node, bytes):  # a set, !!binary, ...
            raise self._refuse_tag("!!binary" if isinstance(node, bytes) else self._tag(node), path)
        return node

    def _map(self, node: CommentedMap, path: PathKey) -> dict[str, Any]:
        self._enter(node, path)
        self.active.add(id(node))
        out: dict[str, Any] = {}
        here = self.sm.pos(path)
        for k, v in node.items():
            key = k if isinstance(k, str) else str(k)
            lc = self._key_pos(node, k)
            if lc is not None:
                self.sm.keys[(*path, key)] = SourcePos(self.file, lc[0] + 1, lc[1] + 1)
                self.sm.values[(*path, key)] = SourcePos(self.file, lc[2] + 1, lc[3] + 1)
            elif here is not None:
                self.sm.keys[(*path, key)] = here
            out[key] = self.plain(v, (*path, key))
        self.active.discard(id(node))
        return out


def _syntax_error(file: str, exc: MarkedYAMLError, text: str = "") -> TopoError:
    mark = exc.problem_mark or exc.context_mark
    pos = SourcePos(file, mark.line + 1, mark.column + 1) if mark else SourcePos(file, 1, 1)
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    if len(problem) > 300:  # e.g. a duplicate key's message quotes both values in full
        problem = problem[:297] + "..."
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


class _TooLarge(Exception):
    """A document whose aliases expand past MAX_YAML_NODES; ``mark`` is where."""

    def __init__(self, mark: Any, *, written: bool = False, recursive: bool = False) -> None:
        super().__init__("too large")
        self.mark = mark
        self.written = written  # more values written out, not through aliases
        self.recursive = recursive  # an alias inside its own anchor


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return list(node.value) if isinstance(node, SequenceNode) else []


def _check_expansion(root: Node) -> None:
    """Raise _TooLarge if the composed document expands to more than MAX_YAML_NODES values
    through aliases, or an alias sits inside its own anchor, before anything builds the
    expansion (ruamel's own messages, e.g. for a duplicate key, print whole values)."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Node) -> int:
        if id(node) in active:
            raise _TooLarge(node.start_mark, recursive=True)
        if id(node) not in sizes:
            active.add(id(node))
            total = 1
            for child in _children(node):
                total += size(child)
                if total > MAX_YAML_NODES:
                    break
            active.discard(id(node))
            sizes[id(node)] = total
        return sizes[id(node)]

    if size(root) <= MAX_YAML_NODES:
        return
    node = root
    while True:  # the innermost value that is still too large
        big = [c for c in _children(node) if sizes.get(id(c), 0) > MAX_YAML_NODES]
        if not big:
            raise _TooLarge(node.start_mark)
        node = big[0]


class _BoundedComposer(Composer):
    """ruamel's composer, refusing a document of more than MAX_YAML_NODES written values
    as soon as it has read that many (a 4 MiB file of ``[1,1,1,...]`` would take minutes)."""

    _count = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._count += 1
        if self._count > MAX_YAML_NODES:
            raise _TooLarge(self.parser.peek_event().start_mark, written=True)
        return super().compose_node(parent, index)


class _BoundedConstructor(RoundTripConstructor):
    """ruamel's round-trip constructor, refusing alias bombs before constructing."""

    def construct_document(self, node: Any) -> Any:
        _check_expansion(node)
        return super().construct_document(node)


def parse_text(text: str, file: str) -> Document:
    """Parse YAML text into a :class:`Document`; syntax errors become diagnostics."""
    sm = SourceMap()
    try:
        raw = _yaml().load(text)
    except _TooLarge as exc:
        where = SourcePos(file, exc.mark.line + 1, exc.mark.column + 1)
        if exc.recursive:
            raise TopoError.one(
                "an alias refers to the mapping or list that contains it", where
            ) from None
        if exc.written:
            raise TopoError.one(
                f"this document has more than {MAX_YAML_NODES:,} YAML values", where
            ) from None
        raise TopoError.one(
            f"this document expands to more than {MAX_YAML_NODES:,} YAML values "
            "(through aliases '*name' and merge keys '<<')",
            where,
            "an alias copies everything its anchor holds; write the values out instead",
        ) from None
    except MarkedYAMLError as exc:
        raise _syntax_error(file, exc, text) from None
    except RecursionError:
        raise TopoError.one(
            "invalid YAML: values are nested too deeply", SourcePos(file, 1, 1)
        ) from None
    except Exception as exc:  # ruamel raises a few unmarked errors (e.g. bad encodings)
        raise TopoError.one(f"invalid YAML: {exc}", SourcePos(file, 1, 1)) from None
    sm.values[()] = SourcePos(file, 1, 1)
    return Document(file, _Plainer(file, sm).plain(raw, ()), sm, raw)


def _read_bounded(path: Path, file: str, *, regular_only: bool) -> bytes:
    """At most MAX_FILE_BYTES of ``path``; only regular files when ``regular_only``
    (a FIFO would block and a device never ends)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise TopoError.one(f"no such file: {file}") from None
    except (OSError, ValueError) as exc:
        raise TopoError.one(
            f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        raise TopoError.one(f"{file} is a directory, not a topology file")
    if regular_only and not stat.S_ISREG(st.st_mode):
        raise TopoError.one(f"{file} is not a regular file (a FIFO, socket or device)")
    mib = MAX_FILE_BYTES // (1024 * 1024)
    too_big = f"{file} is larger than {mib} MiB, the limit for a topology file"
    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_FILE_BYTES:
        raise TopoError.one(too_big)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise TopoError.one(
            f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise TopoError.one(too_big)
    return raw


def read_document(path: Path, *, regular_only: bool = False) -> Document:
    """Read and parse a YAML file (bases of ``extends`` pass ``regular_only``)."""
    file = str(path)
    raw = _read_bounded(path, file, regular_only=regular_only)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise TopoError.one(
            f"{file} is not UTF-8 text ({exc.reason})",
            SourcePos(file, line, col),
            "save the file as UTF-8",
        ) from None
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
