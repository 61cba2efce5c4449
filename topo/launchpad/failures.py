"""A node's failure as the caller of ``wait()`` sees it: the node's exception re-created
from its traceback text -- same type, same message, as Launchpad re-raises it -- with
the node named in an attribute (``node_id``) and in its cause (:class:`NodeFailure`,
printed above it with the node's traceback). No note: pytest's ``match=`` reads notes."""

from __future__ import annotations

import ast
import builtins
import re
import sys
from typing import Any

_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::(?: (.*))?)?$")


class NodeFailure(RuntimeError):
    """A node of a launched program failed; the message holds its traceback."""

    def __init__(self, node_id: str, traceback: str) -> None:
        self.node_id = node_id
        self.traceback = traceback
        super().__init__(f"node {node_id} failed:\n{traceback.rstrip()}")


def exception_for(node_id: str, traceback: str) -> BaseException:
    """The node's exception, re-created where its class can be found in this process (a
    built-in, or a class of a module already imported) and rebuilt with the same text;
    else a :class:`NodeFailure`. Either way ``node_id`` names the node."""
    cause = NodeFailure(node_id, traceback)
    parsed = _last_exception(traceback)
    if parsed is None:
        return cause
    cls = _find_class(parsed[0])
    exc = _rebuild(cls, parsed[1]) if cls is not None else None
    if exc is None:
        return cause
    exc.__cause__ = cause
    exc.node_id = node_id  # type: ignore[attr-defined]
    return exc


def _last_exception(traceback: str) -> tuple[str, str] | None:
    """(class name, message) of the exception a traceback text ends with: the first
    unindented line after the last frame, and the lines after it (a multi-line message)."""
    lines = traceback.rstrip("\n").splitlines()
    start = 0
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            start = i + 1
    for i in range(start, len(lines)):
        if lines[i] and not lines[i][0].isspace():
            match = _EXC_LINE.match(lines[i])
            if match is None:
                return None
            message = "\n".join([match.group(2) or "", *lines[i + 1 :]])
            return match.group(1), message
    return None


def _find_class(name: str) -> type[BaseException] | None:
    """The exception class printed as ``name``: a built-in or ``__main__`` class (printed
    bare), or ``module.Qual.Name`` of a module this process has imported."""
    candidates: list[Any] = []
    if "." not in name:
        main = sys.modules.get("__main__")
        candidates = [getattr(builtins, name, None), getattr(main, name, None)]
    else:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = sys.modules.get(".".join(parts[:cut]))
            if module is None:
                continue
            obj: Any = module
            for attr in parts[cut:]:
                obj = getattr(obj, attr, None)
            candidates.append(obj)
            break
    for obj in candidates:
        if isinstance(obj, type) and issubclass(obj, Exception):
            return obj
    return None


def _rebuild(cls: type[BaseException], message: str) -> BaseException | None:
    """``cls`` built so that ``str()`` gives ``message`` again, or None if it cannot be."""
    args: tuple[Any, ...] = (message,) if message else ()
    if issubclass(cls, KeyError) and message:  # str(KeyError) is the repr of its key
        try:
            args = (ast.literal_eval(message),)
        except (ValueError, SyntaxError):
            pass
    try:
        exc = cls(*args)
    except Exception:
        try:  # a class whose __init__ takes other arguments: set its args directly
            exc = cls.__new__(cls)
            exc.args = args
        except Exception:
            return None
    try:
        same = str(exc) == message
    except Exception:
        same = False
    return exc if same else None
