"""Small, safe expressions inside ``${...}``: arithmetic, comparisons, and/or/not,
conditionals, indexing and a few pure functions — parsed with :mod:`ast` and walked
here, never handed to ``eval``."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "len": len,
}
# Bounds on what one expression may build (docs/topology.md, "Limits"), checked inside nested
# results too: a list of a million references to a million-long list is 10**12 items.
_MAX_SIZE = 1_000_000  # items + characters (an int counts one per 64 bits)
MAX_INT_BITS = 10_000  # about 3,000 decimal digits
_MAX_DEPTH = 100  # nesting of the expression's syntax tree
_MAX_NDIGITS = 1_000  # round(x, n)


class ExprError(ValueError):
    """An expression that does not parse or cannot be evaluated; the message is for users."""


@lru_cache(maxsize=4096)
def parse(source: str) -> ast.expr:
    """Parse an expression (cached); raises ExprError for syntax the language does not have."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression '{_short(source)}': {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExprError(f"expression '{_short(source)}' is too deeply nested") from None
    _check_depth(tree.body, source)
    _check(tree.body, source)
    return tree.body


def _short(source: str) -> str:
    return source if len(source) <= 80 else source[:77] + "..."


def _check_depth(node: ast.AST, source: str) -> None:
    """Refuse syntax trees deeper than _MAX_DEPTH (evaluation recurses once per level)."""
    todo = [(node, 1)]
    while todo:
        sub, depth = todo.pop()
        if depth > _MAX_DEPTH:
            raise ExprError(
                f"expression '{_short(source)}' is nested more than {_MAX_DEPTH} levels deep"
            )
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(sub))


def _check(node: ast.AST, source: str) -> None:
    allowed = (
        ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
        ast.Subscript, ast.List, ast.Tuple, ast.Call, ast.Attribute, ast.Load, ast.Slice,
        ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
    )  # fmt: skip
    for sub in ast.walk(node):
        if not isinstance(sub, allowed):
            raise ExprError(
                f"'{_short(source)}' uses {type(sub).__name__}, which expressions do not support "
                "(allowed: arithmetic, comparisons, and/or/not, x if c else y, a[i], "
                f"{', '.join(FUNCTIONS)})"
            )
        if isinstance(sub, ast.BinOp) and type(sub.op) not in _BINOPS:
            raise ExprError(
                f"'{_short(source)}': operator {type(sub.op).__name__} is not supported"
            )
        if isinstance(sub, ast.Call) and (
            not isinstance(sub.func, ast.Name) or sub.func.id not in FUNCTIONS or sub.keywords
        ):
            raise ExprError(
                f"'{_short(source)}': only these functions can be called: {', '.join(FUNCTIONS)}"
            )
        if isinstance(sub, ast.Attribute) and not isinstance(sub.value, ast.Name):
            raise ExprError(f"'{_short(source)}': attribute access is only allowed on a name")


def names(source: str) -> set[str]:
    """Free names an expression reads (function names excluded); ``seed.key`` counts as one."""
    out: set[str] = set()
    tree = parse(source)
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    attr_bases = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            out.add(f"{n.value.id}.{n.attr}")
            attr_bases.add(id(n.value))
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and id(n) not in funcs and id(n) not in attr_bases:
            out.add(n.id)
    return out


def evaluate(source: str, scope: Mapping[str, Any]) -> Any:
    """Evaluate ``source`` with ``scope`` (names -> values; dotted names like ``seed.key``)."""
    tree = parse(source)
    try:
        return _eval(tree, scope, source)
    except ExprError:
        raise
    except (TypeError, ValueError, ZeroDivisionError, IndexError, KeyError, OverflowError) as e:
        raise ExprError(f"cannot evaluate '{_short(source)}': {_describe(e)}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"cannot evaluate '{_short(source)}': the value is too large") from None


def _describe(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no key {exc.args[0]!r}"
    if isinstance(exc, ZeroDivisionError):
        return "division by zero"
    return str(exc)


def cost(value: Any, limit: int = _MAX_SIZE) -> int:
    """Size of ``value`` counting nested items (a shared list once per reference) and
    characters; stops counting once past ``limit``."""
    memo: dict[int, int] = {}

    def walk(v: Any) -> int:
        if isinstance(v, str):
            return len(v)
        if isinstance(v, bool) or v is None or isinstance(v, float):
            return 1
        if isinstance(v, int):
            return 1 + v.bit_length() // 64
        if not isinstance(v, list | tuple | dict):
            return 1
        if id(v) in memo:
            return memo[id(v)]
        memo[id(v)] = limit + 1  # a container holding itself is too large
        items = [*v.keys(), *v.values()] if isinstance(v, dict) else v
        total = len(items)
        for item in items:
            if total > limit:
                break
            total += walk(item)
        memo[id(v)] = total
        return total

    return walk(value)


def _bounded(value: Any, source: str) -> Any:
    """``value`` if it is within the size limits, else ExprError."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_INT_BITS:
            raise ExprError(
                f"'{_short(source)}' builds an integer of more than {MAX_INT_BITS:,} bits"
            )
    elif isinstance(value, str | list | tuple | dict) and cost(value) > _MAX_SIZE:
        raise ExprError(f"'{_short(source)}' builds a value longer than {_MAX_SIZE:,}")
    return value


def _precheck(op: ast.operator, left: Any, right: Any, source: str) -> None:
    """Refuse an operation whose result would be too large before computing it."""
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (left, right))
    if isinstance(op, ast.Pow) and isinstance(right, int | float) and abs(right) > 4096:
        raise ExprError(f"'{_short(source)}': exponent {right} is too large")
    if isinstance(op, ast.Pow) and ints and right > 0 and abs(left) > 1:
        if (abs(left).bit_length() - 1) * right > MAX_INT_BITS:
            raise ExprError(
                f"'{_short(source)}' builds an integer of more than {MAX_INT_BITS:,} bits"
            )
    if isinstance(op, ast.Mult):
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(n, int) and n > 0:
                if cost(seq) * n > _MAX_SIZE:
                    raise ExprError(f"'{_short(source)}' builds a value longer than {_MAX_SIZE:,}")
    if isinstance(op, ast.Mod) and isinstance(left, str):
        raise ExprError(
            f"'{_short(source)}': '%' formatting of strings is not supported",
        )


def _call(name: str, args: list[Any], source: str) -> Any:
    if name == "round" and len(args) == 2 and isinstance(args[1], int):
        if abs(args[1]) > _MAX_NDIGITS:
            raise ExprError(f"'{_short(source)}': round() takes at most {_MAX_NDIGITS} digits")
    return FUNCTIONS[name](*args)


def _eval(node: ast.expr, scope: Mapping[str, Any], source: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("true", "True"):
            return True
        if node.id in ("false", "False"):
            return False
        if node.id in ("null", "None"):
            return None
        if node.id not in scope:
            raise ExprError(f"unknown name '{node.id}' in '{_short(source)}'")
        return scope[node.id]
    if isinstance(node, ast.Attribute):
        assert isinstance(node.value, ast.Name)
        dotted = f"{node.value.id}.{node.attr}"
        if dotted in scope:
            return scope[dotted]
        base = _eval(node.value, scope, source)
        if isinstance(base, Mapping) and node.attr in base:
            return base[node.attr]
        raise ExprError(f"unknown name '{dotted}' in '{_short(source)}'")
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, scope, source)
        right = _eval(node.right, scope, source)
        _precheck(node.op, left, right, source)
        return _bounded(_BINOPS[type(node.op)](left, right), source)
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, scope, source)
        if isinstance(node.op, ast.Not):
            return not operand
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return +operand
        raise ExprError(f"'{_short(source)}': operator ~ is not supported")
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            value: Any = True
            for v in node.values:
                value = _eval(v, scope, source)
                if not value:
                    return value
            return value
        value = False
        for v in node.values:
            value = _eval(v, scope, source)
            if value:
                return value
        return value
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope, source)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, scope, source)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        if _eval(node.test, scope, source):
            return _eval(node.body, scope, source)
        return _eval(node.orelse, scope, source)
    if isinstance(node, ast.Subscript):
        container = _eval(node.value, scope, source)
        if isinstance(node.slice, ast.Slice):
            s = node.slice
            bounds = [
                None if b is None else _eval(b, scope, source) for b in (s.lower, s.upper, s.step)
            ]
            return container[slice(*bounds)]
        return container[_eval(node.slice, scope, source)]
    if isinstance(node, ast.List | ast.Tuple):
        return _bounded([_eval(e, scope, source) for e in node.elts], source)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, scope, source) for a in node.args]
        return _bounded(_call(node.func.id, args, source), source)
    raise ExprError(
        f"'{_short(source)}': unsupported expression"
    )  # pragma: no cover - _check forbids
